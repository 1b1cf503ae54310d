import Foundation
import HearthCore
import Testing

/// The household simulator's finding 4 and 9 (docs/simulator.md, "Findings"), replayed with
/// replicas and wall clocks given by hand: once clocks are set right, every device ends with the
/// re-stamps of the entries a clock set in the future, whether it took those entries, held them
/// back, or wrote after them; and a removal stamped ahead goes once the clock reaches it.
@Suite("Clock faults: a clock set right again, and the devices that took or held its future entries")
struct ClockSetRightTests {
    let writerID = ReplicaID(high: 0xA, low: 1)
    let peerID = ReplicaID(high: 0xB, low: 1)
    let thirdID = ReplicaID(high: 0xC, low: 1)
    let now: UInt64 = 2_000_000_000_000
    let hour: UInt64 = 3_600_000

    /// What the sync engine does with a delta (``ClockFaultTests/receive(_:into:wall:)``).
    func receive(_ delta: [Entry], into receiver: inout SyncedReplica, wall: UInt64) {
        ClockFaultTests().receive(delta, into: &receiver, wall: wall)
    }

    @Test("A peer that took a future entry (its clock ahead too) takes its writer's re-stamp, though stamped earlier, and wants the peers' whole store")
    func peerThatTookAFutureEntryTakesItsRestamp() throws {
        // A's clock is 15 h ahead; B's 5 h: B takes A's write, within 12 h of its clock.
        var writer = Replica(id: writerID), peer = Replica(id: peerID)
        let future = writer.write("A's", forKey: "k", wall: now + 15 * hour)!
        peer.apply([future], coveredBy: writer.vector, wall: now + 5 * hour)
        #expect(peer.entries["k"] == future)
        // The clocks are set right: A re-stamps its entry to the present.
        #expect(writer.restampFutureEntries(wall: now) == ["k"])
        let restamp = try #require(writer.entries["k"])
        #expect(restamp.timestamp < future.timestamp && restamp.restamps(future))
        peer.apply(peer.winners(of: writer.delta(for: peer.vector)), coveredBy: writer.vector, wall: now + 1000)
        #expect(peer.entries["k"] == restamp, "the peer keeps \(String(describing: peer.entries["k"]))")
        // What the future entry beat here may beat the re-stamp: the peers' whole store is wanted.
        #expect(peer.wantsWhole && writer.wantsWhole)
        // And the old future entry, sent again by a device that has not the re-stamp yet, loses.
        #expect(peer.winners(of: [future]).isEmpty)
    }

    @Test("A device whose writes were stamped just after a future entry re-stamps them once its clock is right, but not the future entries of others")
    func ownWritesAfterAFutureEntryAreRestamped() throws {
        // A (15 h ahead) writes `k` and `o`; B (9.8 h ahead) takes both and writes `k` again,
        // stamped just after A's entry: 15 h ahead, though B's clock never was.
        var writer = Replica(id: writerID), peer = Replica(id: peerID)
        let peerWall = now + 98 * hour / 10
        let futures = [writer.write("A's", forKey: "k", wall: now + 15 * hour)!, writer.write("A's", forKey: "o", wall: now + 15 * hour + 1)!]
        peer.apply(futures, coveredBy: writer.vector, wall: peerWall)
        let written = peer.write("B's", forKey: "k", wall: peerWall + 1000)
        let after = try #require(written)
        #expect(after.timestamp > futures[0].timestamp && peer.clock.last.milliseconds < now + 10 * hour)
        // B's clock is set right: its own write is re-stamped; A's `o` is A's to re-stamp (B's
        // clock may as well be the wrong one now, set behind, and A's entry a valid one).
        #expect(peer.restampFutureEntries(wall: now) == ["k"])
        // Stamped by B's clock (not set back: it was never beyond the bound), within the bound of right clocks.
        #expect(peer.entries["k"]!.value == "B's" && peer.entries["k"]!.timestamp.milliseconds <= now + 12 * hour)
        #expect(peer.entries["k"]!.restamps(after))
        #expect(peer.entries["o"] == futures[1])
        // Nothing left to re-stamp: the next check finds none.
        #expect(peer.restampFutureEntries(wall: now + 2000).isEmpty)
    }

    @Test("A receiver holding a future entry back ends the hold on its writer's re-stamp, even one that loses to a later write here")
    func restampEndsTheHold() throws {
        var writer = Replica(id: writerID), other = Replica(id: thirdID)
        var receiver = SyncedReplica(Replica(id: peerID))
        let future = writer.write("A's", forKey: "k", wall: now + 15 * hour)!
        receive([future], into: &receiver, wall: now)
        #expect(receiver.heldBack[writerID] != nil && !receiver.vector.covers(future))
        // C writes `k` in the present; then A's clock is set right and it re-stamps, before C's write.
        let later = other.write("C's", forKey: "k", wall: now + 1000)!
        receive([later], into: &receiver, wall: now + 1000)
        #expect(writer.restampFutureEntries(wall: now + 500) == ["k"])
        let restamp = writer.entries["k"]!
        #expect(!restamp.wins(over: later))
        receive(writer.delta(for: receiver.vector), into: &receiver, wall: now + 2000)
        // The held entry will never come: the hold ends, and the vector covers the writer again.
        #expect(receiver.heldBack.isEmpty, "still held: \(receiver.heldBack)")
        #expect(receiver.value(forKey: "k") == "C's")
    }

    @Test("A receiver whose clock was behind asks again for the entries it held back once its clock, set right, accepts them")
    func heldEntriesAreAskedForAgain() throws {
        var writer = Replica(id: writerID)
        var receiver = SyncedReplica(Replica(id: peerID))
        // A's clock is 8 h ahead (within the bound); the receiver's 5 h behind: 13 h apart.
        let ahead = writer.write("A's", forKey: "k", wall: now + 8 * hour)!
        receive([ahead], into: &receiver, wall: now - 5 * hour)
        #expect(receiver.heldBack[writerID] != nil && !receiver.wantsWhole)
        #expect(receiver.restampFutureEntries(wall: now - 5 * hour + 1000).isEmpty && !receiver.wantsWhole)
        // Set right: the senders count the entry as sent, so only a whole store brings it again.
        _ = receiver.restampFutureEntries(wall: now)
        #expect(receiver.wantsWhole)
        receive(writer.delta(for: VersionVector()), into: &receiver, wall: now + 1000)
        #expect(receiver.heldBack.isEmpty && receiver.value(forKey: "k") == "A's")
    }

    @Test("A hold that ends without its entry leaves the origin's later refused entries uncovered, and wants the whole store that brings them")
    func endedHoldDoesNotCoverLaterRefusedEntries() throws {
        var writer = Replica(id: writerID)
        var receiver = SyncedReplica(Replica(id: peerID))
        // A's clock is 15 h ahead for two writes: the receiver holds the first back (one hold per
        // origin, on its earliest entry) and refuses the second all the same.
        let first = writer.write("1", forKey: "k1", wall: now + 15 * hour)!
        let second = writer.write("2", forKey: "k2", wall: now + 15 * hour + 1)!
        receive([first, second], into: &receiver, wall: now)
        #expect(receiver.heldBack[writerID]?.sequence == first.sequence)
        // A's clock is set right: it re-stamps both, then writes `k3`. A relay's delta brings the
        // receiver the re-stamp of `k1` and the new write, not yet the re-stamp of `k2`.
        #expect(writer.restampFutureEntries(wall: now + 1000) == ["k1", "k2"])
        let (restampOfFirst, restampOfSecond) = (writer.entries["k1"]!, writer.entries["k2"]!)
        let third = writer.write("3", forKey: "k3", wall: now + 1500)!
        receive([restampOfFirst, third], into: &receiver, wall: now + 2000)
        #expect(receiver.heldBack.isEmpty && receiver.value(forKey: "k1") == "1" && receiver.value(forKey: "k3") == "3")
        // The second's re-stamp is not here: no vector may cover it, or no peer would send it again.
        #expect(!receiver.vector.covers(restampOfSecond), "the receiver covers #\(restampOfSecond.sequence): \(receiver.vector)")
        #expect(!second.wins(over: restampOfSecond))
        #expect(receiver.wantsWhole)
        receive(writer.delta(for: receiver.vector), into: &receiver, wall: now + 3000)
        #expect(receiver.value(forKey: "k2") == "2" && receiver.vector.covers(restampOfSecond))
    }

    @Test("Seed 3 of 8 devices: a removal collected by a clock that had reached it, ahead of the wall clock, still beats an earlier write of its key that comes after")
    func removalCollectedAheadStands() throws {
        var remover = Replica(id: writerID), collector = Replica(id: peerID), late = Replica(id: thirdID)
        // The collector's clock was 9.9 h ahead: it takes a removal stamped 9.3 h ahead.
        let set = remover.write("v", forKey: "k", wall: now)!
        let removal = remover.write(nil, forKey: "k", wall: now + 93 * hour / 10)!
        collector.apply([set, removal], coveredBy: remover.vector, wall: now + 99 * hour / 10)
        // Set right, it collects the removal (its logical clock had reached it; every peer has it).
        collector.notePeer("remover", acknowledged: remover.vector)
        #expect(collector.collectTombstones(coveredBy: collector.stableVector, wall: now + 1000) == 1)
        // A device that never saw the removal re-stamps its write of `k` to the present, before it.
        let restamped = late.write("late", forKey: "k", wall: now + 2000)!
        #expect(!restamped.wins(over: removal))
        #expect(collector.winners(of: [restamped]).isEmpty)
        collector.apply([restamped], wall: now + 3000)
        #expect(collector.value(forKey: "k") == nil, "the collector shows \(String(describing: collector.value(forKey: "k"))), its peers the removal")
        // A write made after the removal still comes in.
        let again = remover.write("again", forKey: "k", wall: now + 4000)!
        #expect(collector.winners(of: [again]) == [again])
    }

    @Test("Finding 9: a removal every peer has, stamped ahead of this clock, goes once the clock reaches it, with no acknowledgement after")
    func tombstoneStampedAheadGoesWhenReached() throws {
        var remover = Replica(id: writerID)
        var receiver = SyncedReplica(Replica(id: peerID))
        let set = remover.write("v", forKey: "k", wall: now)!
        let removal = remover.write(nil, forKey: "k", wall: now + 3 * hour)!
        receive([set, removal], into: &receiver, wall: now)
        _ = receiver.notePeer("remover", acknowledged: remover.vector, wall: now + 1000)
        #expect(receiver.entries["k"] == removal && receiver.tombstoneAwaitingClock == removal.timestamp)
        #expect(receiver.collectReachedTombstones(wall: now + 2 * hour) == 0)
        #expect(receiver.collectReachedTombstones(wall: now + 3 * hour + 1) == 1)
        #expect(receiver.entries["k"] == nil && receiver.tombstoneAwaitingClock == nil)
    }
}
