/// Re-stamping for a ``Replica`` (``Replica/restampFutureEntries(wall:)``): which entries to write
/// again, with the current time, once the replica's clock shows that its wall clock was ahead and
/// has been set right, and the latest stamp of the replica's own entries, which shows its writes
/// stamped after a future entry. One rule with its own state and reason, apart from merging
/// (``Replica``, which holds one and writes the entries again).
///
/// While a device's clock is days ahead, its writes carry timestamps that every peer
/// refuses (no peer lets one clock drag the household into the future), and its hybrid
/// logical clock, which never runs backwards, would go on stamping every later write in
/// the same future after the clock is fixed. So once the wall clock is back behind the
/// logical one by more than the drift bound, the clock restarts from the wall clock and
/// the entries written in that future are re-stamped: the same values (or deletes) as new
/// local writes, which sync like any other. Their old versions lose nothing: no peer took
/// them. Values are unchanged, so nothing is posted.
///
/// Its own writes stamped beyond the bound are re-stamped too when its logical clock is not:
/// each was stamped just after an entry a clock ahead had set in the future (a write after a
/// future entry, ``Replica/write(_:forKey:wall:size:)``), and every peer whose clock is right holds it
/// back. Only its own: the entries of others beyond the bound of a clock that was never beyond
/// it are as likely valid entries seen by a clock set wrongly behind (re-stamping those broke
/// simulator seed 1); their writers re-stamp them.
///
/// A re-stamp replaces the future entry on the peers that took it (a later sequence of the
/// same origin wins, ``Entry/wins(over:)``). The future entry may have beaten, here, entries
/// this replica never saw (a relay superseded them with it, and the vector covers them): so
/// afterwards the peers' whole store is wanted (``Replica/wantsWhole``), and what beats the re-stamp
/// comes back.
package struct FutureStamps: Sendable, Equatable {
    /// At least the latest stamp of the replica's own current entries (exact after
    /// ``Replica/restampFutureEntries(wall:)``): one beyond the drift bound is a write stamped after a
    /// future entry, to re-stamp once the clock is right. Not saved (derived from the entries).
    package private(set) var latestOwnStamp = HLCTimestamp.zero

    package init(of id: ReplicaID, in entries: [StoreKey: Entry]) { recount(of: id, in: entries) }

    /// Notes the stamp of a local write.
    package mutating func noteOwn(_ timestamp: HLCTimestamp) { latestOwnStamp = max(latestOwnStamp, timestamp) }

    /// Makes ``latestOwnStamp`` exact: the latest stamp of `id`'s current entries.
    package mutating func recount(of id: ReplicaID, in entries: [StoreKey: Entry]) {
        latestOwnStamp = entries.values.lazy.filter { $0.origin == id }.map(\.timestamp).max() ?? .zero
    }

    /// The entries of the replica `id` to write again, oldest first, and the clock to restart from
    /// if the logical clock was ahead; `nil` when neither the clock nor an own stamp is beyond the bound.
    package func due(wall: UInt64, id: ReplicaID, clock: HybridLogicalClock,
                     entries: [StoreKey: Entry]) -> (future: [Entry], clock: HybridLogicalClock?)? {
        let bound = wall &+ HybridLogicalClock.maximumDrift
        let clockAhead = clock.last.milliseconds > bound
        guard clockAhead || latestOwnStamp.milliseconds > bound else { return nil }
        let future = entries.values.filter { $0.timestamp.milliseconds > bound && (clockAhead || $0.origin == id) }
            .sorted { ($0.timestamp, $0.origin) < ($1.timestamp, $1.origin) }
        guard clockAhead else { return (future, nil) }
        let present = entries.values.map(\.timestamp).filter { $0.milliseconds <= bound }.max() ?? .zero
        // Not beyond the lead a peer may give the clock: `present` may be a peer's entry hours ahead.
        return (future, HybridLogicalClock(last: min(present, HLCTimestamp(milliseconds: wall &+ HybridLogicalClock.maximumLead, counter: 0))))
    }
}
