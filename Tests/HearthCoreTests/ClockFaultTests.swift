import Foundation
import HearthCore
import Testing

/// The household simulator's findings 2 and 3 (docs/simulator.md, "Findings"), replayed with
/// replicas and wall clocks given by hand: a clock hours behind or ahead must not break "a write
/// made after a device saw a value (or removal) beats it, per key", across tombstone collection
/// and across re-stamping once the clock is set right.
@Suite("Clock faults: causality across tombstone collection and re-stamping")
struct ClockFaultTests {
    let writerID = ReplicaID(high: 0xA, low: 1)
    let laggardID = ReplicaID(high: 0xD, low: 1)
    let now: UInt64 = 2_000_000_000_000
    let hour: UInt64 = 3_600_000

    /// A removes `k`; D, whose clock is 4.9 h behind, applies the removal; every device has it.
    func removalSeenByALaggard() -> (writer: Replica, laggard: Replica, tombstone: Entry, laggardWall: UInt64) {
        let laggardWall = now - 49 * hour / 10
        var writer = Replica(id: writerID), laggard = Replica(id: laggardID)
        let set = writer.write("a", forKey: "k", wall: now)!
        laggard.apply([set], coveredBy: writer.vector, wall: laggardWall)
        let tombstone = writer.write(nil, forKey: "k", wall: now + 1000)!
        laggard.apply([tombstone], coveredBy: writer.vector, wall: laggardWall + 1000)
        laggard.notePeer("writer", acknowledged: writer.vector)
        writer.notePeer("laggard", acknowledged: laggard.vector)
        return (writer, laggard, tombstone, laggardWall)
    }

    @Test("Seed 2: a device whose clock is hours behind keeps a removal until its clock reaches it, so its next write of the key beats it")
    func writeAfterCollectedRemovalBeatsIt() throws {
        var (writer, laggard, tombstone, laggardWall) = removalSeenByALaggard()
        // Every device has the removal; the laggard's clock is still 4.9 h before it.
        #expect(laggard.collectTombstones(coveredBy: laggard.stableVector, wall: laggardWall + 2000) == 0)
        #expect(laggard.entries["k"] == tombstone)
        let written = laggard.write("b", forKey: "k", wall: laggardWall + 3000)
        let write = try #require(written)
        #expect(write.wins(over: tombstone), "\(write.timestamp) after \(tombstone.timestamp)")
        // The writer, which collected nothing yet, takes it: the household agrees on "b".
        writer.apply([write], coveredBy: laggard.vector, wall: now + 4000)
        #expect(writer.value(forKey: "k") == "b" && laggard.value(forKey: "k") == "b")
    }

    @Test("A tombstone goes once the wall clock has reached it, and the clock moves up to it: a later write still beats it")
    func tombstoneGoesOnceTheClockReachesIt() throws {
        var (_, laggard, tombstone, _) = removalSeenByALaggard()
        // The clock is set right: the wall clock is past the removal.
        #expect(laggard.collectTombstones(coveredBy: laggard.stableVector, wall: now + 2000) == 1)
        #expect(laggard.entries["k"] == nil && laggard.history.collected == tombstone.timestamp)
        #expect(laggard.clock.last >= tombstone.timestamp)
        // Even with the wall clock turned back again, the next write of the key comes after it.
        let written = laggard.write("b", forKey: "k", wall: now - 5 * hour)
        let write = try #require(written)
        #expect(write.wins(over: tombstone), "\(write.timestamp) after \(tombstone.timestamp)")
    }

    @Test("After re-stamping turns the clock back, a write of a key whose removal was collected still beats the removal")
    func writeAfterRestampBeatsCollectedRemoval() throws {
        // D's clock is 18 h ahead: it takes A's removal (stamped in the present), collects it,
        // and writes another key in its future.
        var writer = Replica(id: writerID), ahead = Replica(id: laggardID)
        let aheadWall = now + 18 * hour
        let set = writer.write("a", forKey: "k", wall: now - hour)!
        // A's removal is stamped 5 h ahead of the present (its clock is off too, within bounds).
        let tombstone = writer.write(nil, forKey: "k", wall: now + 5 * hour)!
        ahead.apply([set, tombstone], coveredBy: writer.vector, wall: aheadWall)
        ahead.notePeer("writer", acknowledged: writer.vector)
        #expect(ahead.collectTombstones(coveredBy: ahead.stableVector, wall: aheadWall) == 1)
        ahead.write("future", forKey: "other", wall: aheadWall)
        // Its clock is set right: the future entry is re-stamped and the clock turned back.
        #expect(ahead.restampFutureEntries(wall: now) == ["other"])
        let written = ahead.write("b", forKey: "k", wall: now + 1000)
        let write = try #require(written)
        #expect(write.wins(over: tombstone), "\(write.timestamp) after \(tombstone.timestamp)")
    }

    /// D (clock 18 h ahead) writes `k`; B (5.9 h ahead) writes it later; D applies B's write,
    /// which loses to D's future entry, and D's vector covers it. No peer takes D's entry.
    /// How D meets B's write.
    enum Path: CaseIterable, Sendable {
        /// Applied (it loses in `merge`).
        case applied
        /// Dropped unapplied, as the sync engine does (``Replica/winners(of:)``).
        case dropped
        /// Dropped, then D writes `k` again in its future: seed 7, where the highest stamp D
        /// saw of `k` besides its current entry is its own first future write, not B's.
        case droppedThenRewritten
    }

    func futureEntryBeatsALaterWrite(_ path: Path = .applied) -> (ahead: Replica, other: Replica, otherWrite: Entry) {
        var ahead = Replica(id: laggardID), other = Replica(id: writerID)
        ahead.write("D's", forKey: "k", wall: now + 18 * hour)
        // B's origin owns another key on D, so D's vector keeps its counter.
        let elsewhere = other.write("B's", forKey: "o", wall: now + 59 * hour / 10)!
        let otherWrite = other.write("B's", forKey: "k", wall: now + 59 * hour / 10 + 1000)!
        let delta = path == .applied ? [elsewhere, otherWrite] : ahead.winners(of: [elsewhere, otherWrite])
        #expect(ahead.apply(delta, coveredBy: other.vector, wall: now + 18 * hour + 2000) == ["o"])
        if path == .droppedThenRewritten { ahead.write("D's", forKey: "k", wall: now + 18 * hour + 3000) }
        #expect(ahead.vector.covers(otherWrite))
        return (ahead, other, otherWrite)
    }

    @Test("Seed 10: an entry re-stamped once the clock is set right still beats the write it had beaten, so the household converges",
          arguments: [false, true], Path.allCases)
    func restampedEntryBeatsWhatItBeat(reopen: Bool, path: Path) throws {
        var (ahead, other, otherWrite) = futureEntryBeatsALaterWrite(path)
        if reopen {
            // Saved and opened again (a new run) before the clock is set right.
            let data = try ReplicaFile.encode(ahead, header: .init(storeIdentifier: "s", account: ""))
            ahead = try ReplicaFile.decode(data, path: "test").replica.reopened(as: ReplicaID(high: 0xD, low: 2))
        }
        #expect(ahead.restampFutureEntries(wall: now + 4000) == ["k"])
        let restamped = try #require(ahead.entries["k"])
        #expect(restamped.value == "D's" && restamped.wins(over: otherWrite), "\(restamped.timestamp) after \(otherWrite.timestamp)")
        other.apply(ahead.delta(for: other.vector), coveredBy: ahead.vector, wall: now + 59 * hour / 10 + 4000)
        #expect(other.value(forKey: "k") == ahead.value(forKey: "k"))
    }

    @Test("Seed 11: a relay that holds an entry back sends none of its writer's later entries, whose counters would vouch for it; the writer's delta then brings the receiver all of them")
    func relayHoldingAnEntryBackDoesNotVouchForIt() throws {
        var writer = Replica(id: writerID)
        let written = ["a", "b", "c"].enumerated().compactMap { writer.write(.string($1), forKey: StoreKey("k\($0 + 1)"), wall: now + UInt64($0)) }
        try #require(written.count == 3)
        let (first, held, later) = (written[0], written[1], written[2])
        // The relay's engine refused `held` for now (stamped beyond the drift bound of its clock)
        // and took the others: its vector stays below the held entry.
        var relay = SyncedReplica(Replica(id: laggardID))
        _ = relay.applyRemote([first, later], heldBack: [held], wall: now)
        #expect(relay.vector[writerID] == 1 && relay.entries["k3"] == later)
        // The receiver has the first write; the relay's delta to it vouches for nothing it lacks.
        var receiver = Replica(id: ReplicaID(high: 0xC, low: 1))
        receiver.apply([first], wall: now)
        let relayed = relay.delta(for: receiver.vector)
        #expect(relayed.isEmpty, "the relay sent \(relayed.map { "#\($0.sequence)" }) beyond its vector")
        receiver.apply(relayed, wall: now)
        #expect(!receiver.vector.covers(held))
        // The writer sends what the receiver's vector does not cover: the held entry included.
        receiver.apply(writer.delta(for: receiver.vector), wall: now)
        #expect(receiver.value(forKey: "k2") == "b" && receiver.value(forKey: "k3") == "c")
        #expect(receiver.vector[writerID] == 3)
    }

    /// What the sync engine does with a delta (`SyncStore.check`, then `applyRemote`): entries
    /// that lose are dropped unapplied, those stamped beyond the drift bound are held back.
    func receive(_ delta: [Entry], into receiver: inout SyncedReplica, wall: UInt64) {
        let winners = receiver.winningEntries(delta)
        let acceptable = winners.filter { HybridLogicalClock.isAcceptable($0.timestamp, wall: wall) }
        let ahead = winners.filter { !HybridLogicalClock.isAcceptable($0.timestamp, wall: wall) }
        _ = receiver.applyRemote(acceptable, heldBack: ahead, wall: wall)
    }

    @Test("Finding 8: a receiver holding back the sender's future write does not cover the removal the sender superseded with it, so the remover keeps the tombstone until the receiver has the removal")
    func holdingBackAWriteDoesNotCoverWhatItSuperseded() throws {
        let removerID = writerID, receiverID = ReplicaID(high: 0xC, low: 1), otherID = ReplicaID(high: 0xB, low: 1)
        var remover = Replica(id: removerID), ahead = Replica(id: laggardID), other = Replica(id: otherID)
        var receiver = SyncedReplica(Replica(id: receiverID))
        let old = remover.write("old", forKey: "k", wall: now)!
        ahead.apply([old], wall: now + 18 * hour)
        receive([old], into: &receiver, wall: now)
        // D, its clock 18 h ahead, writes `k`; A removes it after (by the true time) and writes `o`.
        let future = ahead.write("D's", forKey: "k", wall: now + 18 * hour + 1000)!
        let removal = remover.write(nil, forKey: "k", wall: now + 2000)!
        let later = remover.write("A's", forKey: "o", wall: now + 3000)!
        // At D the removal loses to its future write: its vector covers the removal all the same.
        ahead.apply(ahead.winners(of: [removal, later]), wall: now + 18 * hour + 4000)
        #expect(ahead.vector.covers(removal) && ahead.entries["k"] == future)
        // B writes `p` twice: D, meeting it late, has only the second write.
        other.write(1, forKey: "p", wall: now + 4000)
        let second = other.write(2, forKey: "p", wall: now + 5000)!
        ahead.apply([second], wall: now + 18 * hour + 5000)

        // D's delta to C: D's write (held back, 18 h ahead of C's clock), A's `o` and B's second write.
        let delta = ahead.delta(for: receiver.vector)
        #expect(Set(delta.map(\.key)) == ["k", "o", "p"])
        receive(delta, into: &receiver, wall: now + 6000)
        #expect(receiver.heldBack[laggardID] != nil && receiver.value(forKey: "k") == "old" && receiver.value(forKey: "o") == "A's")
        // C has neither the removal nor what superseded it at D: its vector must not cover it.
        #expect(!receiver.vector.covers(removal), "the receiver covers \(removal.origin)#\(removal.sequence) with \(receiver.vector)")
        #expect(!receiver.vector.covers(origin: otherID, sequence: 1))

        // So A, told by C and D what they have, keeps its tombstone.
        remover.notePeer("C", acknowledged: receiver.vector)
        remover.notePeer("D", acknowledged: ahead.vector)
        #expect(remover.collectTombstones(coveredBy: remover.stableVector, wall: now + 7000) == 0)
        #expect(remover.entries["k"] == removal)
        // A's delta brings C the removal; A may then collect it.
        receive(remover.delta(for: receiver.vector), into: &receiver, wall: now + 8000)
        #expect(receiver.value(forKey: "k") == nil && receiver.vector.covers(removal))
        remover.notePeer("C", acknowledged: receiver.vector)
        #expect(remover.collectTombstones(coveredBy: remover.stableVector, wall: now + 9000) == 1)

        // Once C's clock reaches D's write, C takes it: nothing is held back, and the advances
        // held off meanwhile (B's, over its first write of `p`, which D superseded) are made.
        #expect(!receiver.vector.covers(origin: otherID, sequence: 1))
        receive(ahead.delta(for: receiver.vector), into: &receiver, wall: now + 7 * hour)
        #expect(receiver.heldBack.isEmpty && receiver.value(forKey: "k") == "D's")
        #expect(receiver.vector[otherID] == 2 && receiver.vector[laggardID] == future.sequence)
    }

    @Test("The collected and superseded stamps survive a file; a file of an earlier build, without them, still opens")
    func stampsArePersistedCompatibly() throws {
        var (ahead, _, otherWrite) = futureEntryBeatsALaterWrite()
        ahead.write(1, forKey: "gone", wall: now + 18 * hour + 3000)
        ahead.write(nil, forKey: "gone", wall: now + 18 * hour + 4000)
        #expect(ahead.collectTombstones(olderThan: HLCTimestamp(milliseconds: now + 19 * hour, counter: 0)) == 1)
        let header = ReplicaFile.Header(storeIdentifier: "s", account: "")
        let data = try ReplicaFile.encode(ahead, header: header)
        let back = try ReplicaFile.decode(data, path: "test").replica
        #expect(back.history.collected == ahead.history.collected && back.history.collected > .zero)
        #expect(back.history.superseded == ["k": [otherWrite.timestamp]])

        guard case .dictionary(var fields) = try BinaryPropertyList.decode(data) else { throw CocoaError(.fileReadCorruptFile) }
        #expect(fields.removeValue(forKey: "collected") != nil && fields.removeValue(forKey: "superseded") != nil)
        let old = try ReplicaFile.decode(try BinaryPropertyList.encode(.dictionary(fields)), path: "old").replica
        #expect(old.entries == ahead.entries && old.history.collected == .zero && old.history.superseded.isEmpty)

        fields["superseded"] = .array([.string("k")])
        #expect(throws: PersistenceError.self) { try ReplicaFile.decode(try BinaryPropertyList.encode(.dictionary(fields)), path: "bad") }
    }
}
