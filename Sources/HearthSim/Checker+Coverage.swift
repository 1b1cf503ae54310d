import Foundation
import HearthCore

/// Every local write, by store, origin and sequence, and the latest write of each key (the
/// model's order): what a replica's vector may be held to (``Checker/covered(before:after:device:store:)``).
struct WriteLog: Sendable {
    var writes: [String: [ReplicaID: [UInt64: Entry]]] = [:]
    var latest: [String: [StoreKey: Entry]] = [:]
}

/// A vector vouches only for what its replica holds (docs/simulator.md, "Invariants"): a peer
/// computes what to send from that vector, so an entry it covers without having it is never
/// sent to it again. Peers' deltas carry only what their vectors cover, and each receiver
/// advances its vector to every entry it applies: a relay that sends a writer's later entries
/// without the earlier ones it owes leaves a gap no one fills. Such a gap shows in the visible
/// set only if the skipped write is still its key's latest once the household is quiet; this
/// sees it when the vector moves over it.
extension Checker {
    static let coverage = "a vector covers only what its replica holds"

    /// A local write, logged; no other device's vector may cover it yet (a sequence given out
    /// again, as by a restart that kept its replica ID, is one the peers that took the first
    /// entry of that number are never sent). `others`: each other honest device's vector of the store.
    func logged(_ entry: Entry, device: Int, store: String, others: [(device: Int, vector: VersionVector)]) {
        writeLog.withLock { log in
            log.writes[store, default: [:]][entry.origin, default: [:]][entry.sequence] = entry
            if Self.beats(entry, log.latest[store]?[entry.key]) { log.latest[store, default: [:]][entry.key] = entry }
        }
        for (other, vector) in others where vector.covers(entry) {
            fail(Self.coverage, "d\(other) \(store): its vector covers d\(device)'s new write \(Self.describe(entry)) before it was made")
            break
        }
    }

    /// `device`'s vector of `store` went from `before` to `after` (a delta applied): every write
    /// it now covers that is still its key's latest anywhere must be what the model says the
    /// device holds, or lose to it. Writes superseded elsewhere are left out: a relay omits a
    /// write it replaced, and the entry that replaced it may still be on its way over another
    /// link (direct first).
    func covered(before: VersionVector, after: VersionVector, device: Int, store: String) {
        guard checksCoverage else { return }
        // A removed device's later writes are refused, not held, by design.
        let removed = removals.withLock { $0.at }
        let skipped = writeLog.withLock { log -> [Entry] in
            var skipped: [Entry] = []
            for (origin, counter) in after.counters {
                let from = before.counters[origin] ?? 0
                guard counter > from, let written = log.writes[store]?[origin] else { continue }
                for (sequence, entry) in written where sequence > from && sequence <= counter && !Self.isVoid(entry, removed) {
                    guard let latest = log.latest[store]?[entry.key], Self.same(latest, entry) else { continue }
                    skipped.append(entry)
                }
            }
            return skipped
        }
        for entry in skipped.sorted(by: { ($0.origin, $0.sequence) < ($1.origin, $1.sequence) }) {
            let held = modelEntry(device: device, store: store, key: entry.key)
            if let held, Self.same(held, entry) || Self.beats(held, entry) { continue }
            fail(Self.coverage, "d\(device) \(store): its vector moved over \(Self.describe(entry)), the latest write of its key, which it never got (it holds \(Self.describe(held)))")
            break
        }
    }
}
