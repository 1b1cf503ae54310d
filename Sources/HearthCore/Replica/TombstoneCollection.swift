/// Tombstone collection for a ``Replica``: which removals may go, the earliest one waiting for the
/// clock, and the origins of those collected. One rule with its own state and reason, apart from
/// merging (``Replica``, which holds one and hands it the entries and the clock to change).
///
/// A tombstone goes once `stable` covers it (every known peer has seen it, so none can send an
/// older value back) or it is older than `horizon`, once the replica's clock has reached it.
///
/// A later write of the key must beat the removal (a write made after seeing a value beats
/// it), but with the tombstone gone there is no entry to stamp it after. So a tombstone is
/// kept until the clock has passed it, and every later stamp is after it: until the clock
/// shows it (``HybridLogicalClock/last``), or until `wall` has reached it, when the clock is
/// moved up to it. A device whose clock is behind keeps the tombstones of a removal stamped
/// ahead of it that much longer (at most ``HybridLogicalClock/maximumDrift``, the most a
/// peer's stamp may be ahead); raising the clock to the tombstone at once instead would drag
/// every later write that far ahead, which the clock's bound exists to prevent.
/// ``Replica/history`` keeps the highest stamp collected, for when
/// ``Replica/restampFutureEntries(wall:)`` turns the clock back.
package struct TombstoneCollection: Sendable, Equatable {
    /// What vector covers the tombstones that may go.
    package enum Covering {
        case given(VersionVector?)
        /// ``Replica/stableVector`` (``KnownPeers/allCover(_:with:)``), without working it out: it
        /// runs at every acknowledgement, and the stable vector intersects every peer's vector over
        /// every origin, where a tombstone needs only its own origin's counters.
        case stable
    }

    /// Origins of tombstones the replica collected: their counters stay in the vector for the
    /// rest of this run, though the origin may own no current entry any more.
    ///
    /// A replica collects a tombstone once every peer has told it that it has the tombstone, but
    /// a peer learns that this replica has it only from this replica's vector. Had the counter
    /// gone with the tombstone (``Replica/compactVector()``), a peer that had not yet heard it would
    /// keep its own copy until the 30-day horizon: CI saw one do so (PartitionTests, when the
    /// collecting replica applied the tombstone and collected it in the same step).
    package private(set) var retiredOrigins: Set<ReplicaID> = []

    /// The earliest tombstone ``collect(covering:olderThan:wall:peers:vector:entries:tallies:clock:history:)``
    /// found due but not yet reached by the clock, if any: collected on the heartbeat once reached
    /// (``Replica/collectReachedTombstones(olderThan:wall:)``). Not saved: a reopened
    /// replica collects at its peers' first acknowledgements.
    package private(set) var awaitingClock: HLCTimestamp?

    package init() {}

    /// Whether a tombstone was waiting for the clock and the clock (or `wall`) has reached it.
    /// Collection is otherwise tried only at an acknowledgement, and a quiet household sends none:
    /// a removal stamped ahead by a clock since set right would stay until the next write
    /// (docs/simulator.md, finding 9).
    package func isReached(clock: HLCTimestamp, wall: UInt64) -> Bool {
        guard let awaiting = awaitingClock else { return false }
        return awaiting <= clock || awaiting.milliseconds <= wall
    }

    /// Keeps only the retired origins whose counters `kept` keeps.
    package mutating func retain(_ kept: [ReplicaID: UInt64]) {
        if retiredOrigins.contains(where: { kept[$0] == nil }) { retiredOrigins = retiredOrigins.filter { kept[$0] != nil } }
    }

    /// Removes from `entries` the tombstones that may go (see the type) and returns how many went.
    package mutating func collect(covering: Covering, olderThan horizon: HLCTimestamp?, wall: UInt64?,
                                  peers: KnownPeers, vector: VersionVector, entries: inout [StoreKey: Entry],
                                  tallies: inout EntryTallies, clock: inout HybridLogicalClock, history: inout StampHistory) -> Int {
        // Tombstones are the entries that are no live key: with none, no pass over the entries.
        guard entries.count > tallies.usage.keys else { awaitingClock = nil; return 0 }
        var awaiting: HLCTimestamp?
        let doomed = entries.values.filter { entry in
            guard entry.isTombstone else { return false }
            let due: Bool
            switch covering {
            case .given(let stable): due = stable?.covers(entry) == true || horizon.map { entry.timestamp < $0 } == true
            case .stable: due = peers.allCover(entry, with: vector) || horizon.map { entry.timestamp < $0 } == true
            }
            guard due else { return false }
            guard entry.timestamp <= clock.last || wall.map({ entry.timestamp.milliseconds <= $0 }) == true else {
                awaiting = min(awaiting ?? entry.timestamp, entry.timestamp)
                return false
            }
            return true
        }
        awaitingClock = awaiting
        for entry in doomed {
            if let wall { clock.observe(entry.timestamp, wall: wall) }
            history.collected(entry, wall: wall)
            entries[entry.key] = nil
            tallies.count(entry, -1)
            retiredOrigins.insert(entry.origin)
        }
        return doomed.count
    }
}
