import Foundation
import HearthCore

/// The invariants, checked against a model of its own as the run goes and at quiescence.
///
/// The model keeps, for each device and store, the entry each key should hold: a local write
/// replaces it (and must win over what the device had: the HLC carries causality), a remote
/// entry replaces it only if it wins by (HLC timestamp, origin), compared here, not by the
/// product's `Entry.wins`. A crash sets it back to what the device last saved; a restart must
/// load exactly that. A write is acknowledged once its own device saved it (durable, as
/// `synchronize()` reports it); at quiescence nothing older may stand in its key's place.
/// Tombstones (Checker+Tombstones.swift) go once every device has them, not before, not later.
final class Checker: Sendable {
    struct Violation: Sendable {
        let invariant: String
        let detail: String
    }

    struct Place: Hashable {
        let device: Int
        let store: String
    }

    struct State {
        var held: [Place: [StoreKey: Entry]] = [:]
        var durable: [Place: [StoreKey: Entry]] = [:]
        /// Per key, every entry a device held and saw replaced by a peer's: what a drop
        /// may bring back (`Replica.displaced`; Checker+Removals.swift).
        var replaced: [Place: [StoreKey: [Entry]]] = [:]
        /// Per store and key, the latest write its own device made durable.
        var acknowledged: [String: [StoreKey: Entry]] = [:]
        var violations: [Violation] = []
    }

    let state = Locked(State())
    private let trace: Trace
    /// The device prefix of each device's origins (`ReplicaID.devicePrefix`); a device joining
    /// again with a new key has two.
    let prefixes: Locked<[UInt64: Int]>
    /// The removals made (Checker+Removals.swift).
    let removals = Locked(RemovalLog())
    /// The devices the invariants speak for (all but a hostile member).
    let honest: [Int]
    /// Every local write (Checker+Coverage.swift).
    let writeLog = Locked(WriteLog())
    /// Per device and store, the wall clock of its replica's last acknowledgement from a peer
    /// (Checker+Tombstones.swift).
    let lastAcknowledgement = Locked<[String: UInt64]>([:])
    /// Whether vectors are held to what their replicas hold as deltas move them: not with a
    /// hostile member, whose withheld entries do leave such gaps (finding 7), nor with clock
    /// jumps beyond the bound, whose held and re-stamped entries the write log does not follow.
    let checksCoverage: Bool

    init(trace: Trace, prefixes: [UInt64: Int], honest: [Int], checksCoverage: Bool) {
        self.trace = trace
        self.prefixes = Locked(prefixes)
        self.honest = honest
        self.checksCoverage = checksCoverage
    }

    /// The entry the model says `device` holds for `key` in `store` (a collected removal included).
    func modelEntry(device: Int, store: String, key: StoreKey) -> Entry? {
        state.withLock { $0.held[Place(device: device, store: store)]?[key] }
    }

    /// Every entry the model says `device` holds in `store`.
    func modelEntries(device: Int, store: String) -> [StoreKey: Entry] {
        state.withLock { $0.held[Place(device: device, store: store)] ?? [:] }
    }

    var violations: [Violation] { state.withLock { $0.violations } }

    /// The invariants of account switches and notifications (``AccountChecks``), over this model.
    var accounts: AccountChecks { AccountChecks(checker: self) }

    func fail(_ invariant: String, _ detail: String) {
        trace.log("VIOLATION \(invariant): \(detail)")
        state.withLock { $0.violations.append(Violation(invariant: invariant, detail: detail)) }
    }

    /// Last writer wins, as the model orders writes: by (timestamp, origin); but of two entries
    /// of one origin, the later sequence (the protocol's one exception: an origin's re-stamp of
    /// its future entry, stamped earlier, replaces it; docs/protocol.md, "A clock set right
    /// again"). That the later sequence is a re-stamp, not a write stamped before what its device
    /// saw, is *causality*'s to check (``stampBeats(_:_:)``).
    static func beats(_ a: Entry, _ b: Entry?) -> Bool {
        guard let b else { return true }
        if a.origin == b.origin { return a.sequence > b.sequence }
        return stampBeats(a, b)
    }

    /// By (timestamp, origin) alone.
    static func stampBeats(_ a: Entry, _ b: Entry) -> Bool {
        if a.timestamp != b.timestamp { return a.timestamp > b.timestamp }
        return a.origin > b.origin
    }

    /// The same write (the signature aside: a local entry is signed later).
    static func same(_ a: Entry?, _ b: Entry?) -> Bool {
        switch (a, b) {
        case (nil, nil): true
        case (let a?, let b?): a.timestamp == b.timestamp && a.origin == b.origin && a.sequence == b.sequence && a.value == b.value
        // A collected tombstone is no entry at all.
        case (let a?, nil): a.isTombstone
        case (nil, let b?): b.isTombstone
        }
    }

    static func describe(_ entry: Entry?) -> String {
        guard let entry else { return "nothing" }
        let value = entry.value.map { "\($0)" } ?? "removed"
        return "\(entry.key.string)=\(value) @\(entry.timestamp) \(entry.origin)#\(entry.sequence)"
    }

    // MARK: As the run goes

    /// A local write. `prior` is the entry it replaced in the replica; `restamp` says the
    /// replica wrote one of its own entries again (its clock set right), not a new write.
    func wrote(_ entry: Entry, replacing prior: Entry?, restamp: Bool = false, device: Int, store: String, now: (StoreKey) -> Entry?) {
        let place = Place(device: device, store: store)
        // What the device saw of the key: the replica's entry, or a removal it has collected
        // since (the model keeps it).
        let kept = state.withLock { $0.held[place]?[entry.key] }
        let seen = [prior, kept].compactMap { $0 }.max { Self.stampBeats($1, $0) }
        if restamp {
            // The same write under a new stamp: what was acknowledged of it now stands as this. A
            // local write of a key re-stamped in the same step (`SimulatedStore.write`) carries a
            // new value: it supersedes the device's acknowledged write as any later write of its does.
            state.withLock { s in
                if let acknowledged = s.acknowledged[store]?[entry.key], acknowledged.origin.devicePrefix == entry.origin.devicePrefix,
                   acknowledged.timestamp > entry.timestamp {
                    s.acknowledged[store]?[entry.key] = entry
                }
            }
        } else if let seen, !Self.stampBeats(entry, seen) {
            fail("causality", "d\(device) \(store): its write \(Self.describe(entry)) does not beat what it saw, \(Self.describe(seen))"
                 + (prior == nil ? " (a removal it had collected)" : ""))
        }
        state.withLock { $0.held[place, default: [:]][entry.key] = entry }
        compare([entry.key], at: place, now: now)
    }

    func applied(_ entries: [Entry], device: Int, store: String, now: (StoreKey) -> Entry?) {
        let place = Place(device: device, store: store)
        state.withLock { s in
            for entry in entries where Self.beats(entry, s.held[place]?[entry.key]) {
                if let old = s.held[place]?[entry.key] {
                    s.replaced[place, default: [:]][entry.key, default: []].append(old)
                }
                s.held[place, default: [:]][entry.key] = entry
            }
        }
        compare(Set(entries.map(\.key)), at: place, now: now)
    }

    /// The replica holds for each key what the model says it should.
    func compare(_ keys: some Sequence<StoreKey>, at place: Place, now: (StoreKey) -> Entry?) {
        for key in keys {
            let expected = state.withLock { $0.held[place]?[key] }
            let actual = now(key)
            guard !Self.same(expected, actual) else { continue }
            let resurrected = expected?.isTombstone == true && actual?.isTombstone == false
            fail(resurrected ? "deletes never come back" : "last writer wins",
                 "d\(place.device) \(place.store) holds \(Self.describe(actual)), the model \(Self.describe(expected))")
        }
    }

    func saved(_ replica: Replica, device: Int, store: String) {
        let place = Place(device: device, store: store)
        let (prefixes, removed) = (prefixes.withLock { $0 }, removals.withLock { $0.at })
        state.withLock { s in
            // The model's view, not the file's: it keeps the tombstones the replica collected
            // (the replica equals it but for those, as checked at every change).
            s.durable[place] = s.held[place] ?? [:]
            // A removed device's writes are held to "its earlier ones everywhere" instead (Checker+Removals.swift).
            for entry in replica.entries.values where prefixes[entry.origin.devicePrefix] == device && removed[entry.origin.devicePrefix] == nil {
                if Self.beats(entry, s.acknowledged[store]?[entry.key]) { s.acknowledged[store, default: [:]][entry.key] = entry }
            }
        }
    }

    /// The device lost power: it holds what it saved.
    func crashed(device: Int, stores: [String]) {
        state.withLock { s in
            for store in stores {
                let place = Place(device: device, store: store)
                s.held[place] = s.durable[place] ?? [:]
            }
        }
    }

    /// What a restarted device loaded must be what it saved last. A device that joined again
    /// with a new key loads its old key's unsigned entries under its new origin (the product's
    /// `adoptUnboundEntries`): the same writes (key, value, timestamp), now the model's.
    func loaded(_ replica: Replica, device: Int, store: String) {
        let place = Place(device: device, store: store)
        var expected = state.withLock { $0.durable[place] ?? [:] }
        let prefixes = prefixes.withLock { $0 }
        for key in Set(expected.keys).union(replica.entries.keys) where !Self.same(expected[key], replica.entries[key]) {
            if let saved = expected[key], let loaded = replica.entries[key], saved.origin != loaded.origin,
               prefixes[saved.origin.devicePrefix] == device, prefixes[loaded.origin.devicePrefix] == device,
               saved.timestamp == loaded.timestamp, saved.value == loaded.value {
                expected[key] = loaded
                // A write of its new origin from now on (Checker+Coverage.swift).
                writeLog.withLock { log in
                    log.writes[store, default: [:]][loaded.origin, default: [:]][loaded.sequence] = loaded
                    if Self.beats(loaded, log.latest[store]?[loaded.key]) { log.latest[store, default: [:]][loaded.key] = loaded }
                }
                continue
            }
            fail("durability", "d\(device) \(store) loaded \(Self.describe(replica.entries[key])) for \(key.string), saved \(Self.describe(expected[key]))")
        }
        state.withLock { $0.held[place] = expected }
    }

    // MARK: At quiescence

    /// Every device shows the same set of each store, the one the model says, and no write its
    /// device made durable was lost.
    func checkQuiescent(_ replicas: [String: [(device: Int, replica: Replica)]]) {
        for (store, holders) in replicas.sorted(by: { $0.key < $1.key }) {
            guard let (first, reference) = holders.first.map({ ($0.device, Self.visible($0.replica)) }) else { continue }
            for (device, replica) in holders.dropFirst() {
                let shown = Self.visible(replica)
                guard shown != reference else { continue }
                let differing = Set(shown.keys).symmetricDifference(reference.keys).union(shown.keys.filter { shown[$0] != reference[$0] })
                let key = differing.sorted { $0.string < $1.string }.first!
                fail("convergence", "\(store): d\(device) shows \(Self.describe(replica.entries[key])), d\(first) \(Self.describe(holders[0].replica.entries[key])) (\(differing.count) keys differ)")
                break
            }
            let (acknowledged, held) = state.withLock { ($0.acknowledged[store] ?? [:], $0.held[Place(device: first, store: store)] ?? [:]) }
            for (key, write) in acknowledged.sorted(by: { $0.key.string < $1.key.string }) {
                let standing = held[key]
                guard let standing, !Self.beats(write, standing) else {
                    let resurrected = write.isTombstone && standing?.isTombstone == false
                    fail(resurrected ? "deletes never come back" : "no acknowledged write lost",
                         "\(store): \(Self.describe(write)) was durable, d\(first) ends with \(Self.describe(standing))")
                    continue
                }
            }
        }
    }

    /// What a replica shows: its live entries, by key (stamp and origin included).
    private static func visible(_ replica: Replica) -> [StoreKey: String] {
        var shown: [StoreKey: String] = [:]
        for (key, entry) in replica.entries where !entry.isTombstone { shown[key] = describe(entry) }
        return shown
    }
}
