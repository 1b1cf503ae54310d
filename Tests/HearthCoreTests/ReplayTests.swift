import Foundation
import HearthCore
import Testing

/// The household simulator's finding 6 (docs/simulator.md, "Findings", `--hostile`): a member
/// replaying an old entry of a key whose removal every device had collected brought the removed
/// value back on the device it replayed to, and only there. An entry the replica's vector covers,
/// of a key it holds no entry of, lost to that removal: it is dropped like any other loser.
@Suite("Replays of entries whose removal was collected")
struct ReplayTests {
    let aID = ReplicaID(high: 0xA, low: 1)
    let bID = ReplicaID(high: 0xB, low: 1)
    let cID = ReplicaID(high: 0xC, low: 1)
    let now: UInt64 = 2_000_000_000_000

    /// A writes `k`, then removes it; B takes both, every device has the removal, and B collects it.
    func collectedRemoval() -> (a: Replica, b: Replica, old: Entry) {
        var a = Replica(id: aID), b = Replica(id: bID)
        let old = a.write("old", forKey: "k", wall: now)!
        b.apply([old], wall: now + 10)
        let removal = a.write(nil, forKey: "k", wall: now + 1000)!
        b.apply([removal], wall: now + 1010)
        b.notePeer("a", acknowledged: a.vector)
        #expect(b.collectTombstones(coveredBy: b.stableVector, wall: now + 2000) == 1)
        #expect(b.entries["k"] == nil)
        return (a, b, old)
    }

    @Test("Seed 5 of 4 devices with a hostile member: an old entry sent again after its removal was collected stays out")
    func replayedEntryStaysOut() {
        var (_, b, old) = collectedRemoval()
        #expect(b.winners(of: [old]).isEmpty)
        b.apply(b.winners(of: [old]), wall: now + 3000)
        #expect(b.entries["k"] == nil && b.value(forKey: "k") == nil)
    }

    @Test("The replica's own old entry, replayed to it, stays out too")
    func ownReplayedEntryStaysOut() {
        var b = Replica(id: bID), c = Replica(id: cID)
        let own = b.write("mine", forKey: "k", wall: now)!
        c.apply([own], wall: now + 10)
        let removal = c.write(nil, forKey: "k", wall: now + 1000)!
        b.apply([removal], wall: now + 1010)
        b.notePeer("c", acknowledged: c.vector)
        #expect(b.collectTombstones(coveredBy: b.stableVector, wall: now + 2000) == 1)
        #expect(b.winners(of: [own]).isEmpty)
    }

    @Test("A new write of a removed key, which no vector covers yet, still comes in")
    func newWriteComesIn() {
        var (a, b, _) = collectedRemoval()
        let again = a.write("new", forKey: "k", wall: now + 5000)!
        #expect(b.winners(of: [again]) == [again])
        var c = Replica(id: cID)
        let other = c.write("other", forKey: "k", wall: now + 6000)!
        #expect(b.winners(of: [other]) == [other])
    }
}
