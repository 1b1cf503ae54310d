/// What a replica remembers of stamps that are no longer on its entries, so that causality
/// survives tombstone collection and re-stamping (issue 28's simulator found both gaps): a write
/// made after a device saw a value (or a removal) must beat it, per key, even once the entry
/// that carried that stamp is gone from here.
///
/// Saved with the replica (`collected` and `superseded` in ``ReplicaFile``). Kept apart from
/// ``Replica`` because it is one rule with its own bounds: ``Replica`` applies it when it writes
/// (``stampForNewKey(after:)``), merges (``noteLoser(_:against:)``), re-stamps
/// (``restamp(_:forKey:within:)``) and collects (``collected(_:)``).
package struct StampHistory: Sendable, Equatable {
    /// The highest stamp of a tombstone the replica collected: a write of a key with no entry is
    /// stamped after it, as a write of a key with one is stamped after that entry.
    package private(set) var collected: HLCTimestamp
    /// For each key, the stamps the replica saw of it on entries that are not its current one:
    /// entries the current one (or one before it) replaced, or peers' that lost to it, in
    /// ascending order, at most ``maximumPerKey``.
    ///
    /// Not one highest stamp: the highest is often the replica's own future write of the key,
    /// which its later write replaced, and which hides the peer's write below it that a
    /// re-stamped entry must beat.
    package private(set) var superseded: [StoreKey: [HLCTimestamp]]

    /// How many superseded stamps a key keeps. Past it the lower of the two closest goes: a
    /// re-stamp whose bound falls between them comes out below the higher one (a key written
    /// that often while the clock was more than a drift bound ahead).
    package static let maximumPerKey = 8

    /// A history restored from a file; stamps of keys `hasEntry` denies went with their
    /// tombstones and are dropped.
    package init(collected: HLCTimestamp = .zero, superseded: [StoreKey: [HLCTimestamp]] = [:],
                 hasEntry: (StoreKey) -> Bool = { _ in true }) {
        self.collected = collected
        self.superseded = superseded.filter { hasEntry($0.key) }
            .mapValues { Array(Set($0).sorted().suffix(Self.maximumPerKey)) }
    }

    /// The stamp for a write of a key that has no entry, given the clock's `timestamp`: after
    /// every collected removal. Only after ``Replica/restampFutureEntries(wall:)`` turned the
    /// clock back can the clock be behind one (collection waits for the clock to reach it).
    package func stampForNewKey(after timestamp: HLCTimestamp) -> HLCTimestamp {
        collected >= timestamp ? HybridLogicalClock.successor(of: collected) : timestamp
    }

    /// The stamp for re-stamping `key` at the clock's `timestamp`: after every stamp of the key
    /// seen here within `bound` (milliseconds). The future entry beat those writes here, where
    /// they will not be sent again, and so must its new stamp, or peers keep them and this
    /// replica the re-stamped entry.
    package func restamp(_ timestamp: HLCTimestamp, forKey key: StoreKey, within bound: UInt64) -> HLCTimestamp {
        guard let seen = superseded[key]?.last(where: { $0.milliseconds <= bound }), seen >= timestamp else { return timestamp }
        return HybridLogicalClock.successor(of: seen)
    }

    /// `remote` lost to `current`, the key's entry here: its stamp is kept, unless it is the
    /// current entry sent again.
    package mutating func noteLoser(_ remote: Entry, against current: Entry) {
        if remote.origin != current.origin || remote.sequence != current.sequence { note(remote.timestamp, forKey: remote.key) }
    }

    /// Records that the replica saw `timestamp` on an entry of `key` that is not its current one.
    package mutating func note(_ timestamp: HLCTimestamp, forKey key: StoreKey) {
        // In place: a copy taken out of the dictionary and stored back shares its buffer with
        // the dictionary's, so the insert would copy the key's stamps on every merge.
        Self.insert(timestamp, into: &superseded[key, default: []])
    }

    /// Puts `timestamp` in its place in `stamps` (ascending, no repeats), dropping the lower of
    /// the two closest past ``maximumPerKey``.
    private static func insert(_ timestamp: HLCTimestamp, into stamps: inout [HLCTimestamp]) {
        let index = stamps.firstIndex { $0 >= timestamp } ?? stamps.endIndex
        guard index == stamps.endIndex || stamps[index] != timestamp else { return }
        stamps.insert(timestamp, at: index)
        if stamps.count > maximumPerKey {
            let closest = stamps.indices.dropLast().min { stamps[$0 + 1].rawValue - stamps[$0].rawValue < stamps[$1 + 1].rawValue - stamps[$1].rawValue }!
            stamps.remove(at: closest)
        }
    }

    /// `tombstone` was collected: its stamp raises ``collected``, and its key's stamps go with it.
    /// One stamped ahead of `wall` (collected because this replica's clock had reached it, a
    /// clock that was ahead) is kept in ``collectedAhead`` until `wall` is a drift bound past it.
    package mutating func collected(_ tombstone: Entry, wall: UInt64? = nil) {
        collected = max(collected, tombstone.timestamp)
        superseded[tombstone.key] = nil
        if let wall {
            if !collectedAhead.isEmpty { collectedAhead = collectedAhead.filter { $0.value.timestamp.milliseconds &+ HybridLogicalClock.maximumDrift > wall } }
            if tombstone.timestamp.milliseconds > wall { collectedAhead[tombstone.key] = tombstone }
        }
    }

    /// Removals this replica collected while they were stamped ahead of its wall clock, by key:
    /// an entry of the key that loses to one (a re-stamp to the present of a write the removal
    /// beat, made by a device that never saw the removal) must not take the key here while the
    /// devices whose clocks have not reached the removal keep it (docs/simulator.md, finding 4,
    /// seed 3 of 8 devices). Not saved; empty unless a clock was ahead.
    package private(set) var collectedAhead: [StoreKey: Entry] = [:]

    /// Whether `entry`, of a key with no entry, lost to a removal collected ahead of the clock.
    package func losesToCollectedRemoval(_ entry: Entry) -> Bool {
        guard let removal = collectedAhead[entry.key] else { return false }
        return !entry.wins(over: removal) && !(entry.origin == removal.origin && entry.sequence == removal.sequence)
    }
}
