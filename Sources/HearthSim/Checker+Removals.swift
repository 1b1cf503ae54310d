import Foundation
import HearthCore

/// The removals made in a run, as the checker follows them.
struct RemovalLog: Sendable {
    /// By device prefix (`ReplicaID.devicePrefix`): when that identity was removed (the record's `at`).
    var at: [UInt64: UInt64] = [:]
    /// Devices removed and not joined again: the invariants no longer speak for them.
    var out: Set<Int> = []
    /// The removed identities' device IDs (hex), as replicas know their peers.
    var ids: Set<String> = []
    /// By store: a removed device's writes stamped before its removal that a device still in the
    /// household had saved when it was removed.
    var earlier: [String: [Entry]] = [:]
}

/// Device removals (docs/simulator.md, "Invariants"): a removed device's writes stamped after its
/// removal are dropped, refused and in the end held by no device of the household; those stamped
/// before stay, and those a member had saved end on every member (unless a later write beat them).
extension Checker {
    static let removal = "a removed device's later writes are nowhere, and its earlier ones everywhere"

    /// Whether `entry` is a removed device's write stamped after its removal (refused by every
    /// device that knows of it), by `removed` (``RemovalLog/at``).
    static func isVoid(_ entry: Entry, _ removed: [UInt64: UInt64]) -> Bool {
        removed[entry.origin.devicePrefix].map { entry.timestamp.milliseconds > $0 } ?? false
    }

    /// `device`'s identity (origins of `prefix`) was removed at `at`. Its writes are no longer
    /// held to "no acknowledged write lost" (those it never sent are its own); instead those
    /// stamped before the removal that another member had saved are to end everywhere.
    func removed(device: Int, id: String, prefix: UInt64, at: UInt64) {
        let out = removals.withLock { log in
            log.at[prefix] = at
            log.ids.insert(id)
            log.out.insert(device)
            return log.out
        }
        let earlier = state.withLock { s -> [String: [Entry]] in
            for store in s.acknowledged.keys { s.acknowledged[store] = s.acknowledged[store]?.filter { $0.value.origin.devicePrefix != prefix } }
            var earlier: [String: [UInt64: Entry]] = [:]
            for (place, entries) in s.durable where honest.contains(place.device) && !out.contains(place.device) {
                for entry in entries.values where entry.origin.devicePrefix == prefix && entry.timestamp.milliseconds <= at {
                    earlier[place.store, default: [:]][entry.sequence] = entry
                }
            }
            return earlier.mapValues { $0.values.sorted { $0.sequence < $1.sequence } }
        }
        removals.withLock { log in
            for (store, entries) in earlier { log.earlier[store, default: []] += entries }
        }
    }

    /// `device` joined again under a new key (origins of `prefix`); `old` was its removed one.
    func rejoined(device: Int, prefix: UInt64, old: UInt64) {
        prefixes.withLock { $0[prefix] = device }
        _ = removals.withLock { $0.out.remove(device) }
    }

    /// `device`'s store dropped `entries` (a removed device's, ``SyncReplica/dropEntries``): each
    /// must be stamped after its device's removal; the model lets them go too. What the replica
    /// brings back in a dropped entry's place (`Replica.displaced`) must be an entry this device
    /// held of that key and saw replaced by a peer's entry, and no removed device's later write.
    func dropped(_ entries: [Entry], device: Int, store: String, now: (StoreKey) -> Entry?) {
        let removed = removals.withLock { $0.at }
        for entry in entries where !Self.isVoid(entry, removed) {
            fail(Self.removal, "d\(device) \(store) dropped \(Self.describe(entry)), not stamped after its device's removal")
        }
        let place = Place(device: device, store: store)
        let restored = state.withLock { s -> [Entry] in
            var unknown: [Entry] = []
            // A removal of the removed device's that the replica collected is a later write too:
            // the replica had no entry to drop, and the value it had replaced may come back from
            // a peer's whole store (seed 15 with --thief).
            for (key, held) in s.held[place] ?? [:] where held.isTombstone && Self.isVoid(held, removed) && now(key) == nil {
                s.held[place]?[key] = nil
            }
            for entry in entries where Self.same(s.held[place]?[entry.key], entry) {
                s.held[place]?[entry.key] = nil
                guard let back = now(entry.key) else { continue }
                if !Self.isVoid(back, removed), s.replaced[place]?[entry.key]?.contains(where: { Self.same($0, back) }) == true {
                    s.held[place]?[entry.key] = back
                } else {
                    unknown.append(back)
                }
            }
            return unknown
        }
        for entry in restored {
            fail(Self.removal, "d\(device) \(store) brought back \(Self.describe(entry)) for a dropped entry, not an entry it held that a peer's replaced")
        }
        compare(entries.map(\.key), at: place, now: now)
    }

    /// At quiescence, over the members (removed devices left out): none holds a removed device's
    /// write stamped after its removal; each of its earlier writes a member had saved is held by
    /// every member, unless a later write of its key was made (not followed with a hostile
    /// member or clock jumps, whose entries the write log does not hold).
    func checkRemovals(_ replicas: [String: [(device: Int, replica: Replica)]]) {
        let (removed, earlier) = removals.withLock { ($0.at, $0.earlier) }
        guard !removed.isEmpty else { return }
        for (store, holders) in replicas.sorted(by: { $0.key < $1.key }) {
            for (device, replica) in holders {
                let void = replica.entries.values.filter { Self.isVoid($0, removed) }.sorted { $0.key.string < $1.key.string }
                guard let first = void.first else { continue }
                fail(Self.removal, "d\(device) \(store) holds \(Self.describe(first)), stamped after its device's removal at \(removed[first.origin.devicePrefix]!) (\(void.count) such entries)")
            }
            guard checksCoverage else { continue }
            let writes = writeLog.withLock { $0.writes[store] ?? [:] }.values.flatMap(\.values).filter { !Self.isVoid($0, removed) }
            for write in earlier[store] ?? [] where !writes.contains(where: { $0.key == write.key && Self.beats($0, write) }) {
                for (device, replica) in holders where !Self.same(replica.entries[write.key], write) {
                    fail(Self.removal, "d\(device) \(store) holds \(Self.describe(replica.entries[write.key])), not \(Self.describe(write)), the latest write, made by a device before its removal")
                    break
                }
            }
        }
    }
}
