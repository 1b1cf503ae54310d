import HearthCore
import HearthTestSupport
import Testing

/// ``Replica/collectStableTombstones(olderThan:wall:)`` decides per tombstone from its origin's
/// counters what ``Replica/collectTombstones(coveredBy:olderThan:wall:)`` decides from the stable
/// vector (the intersection of every peer's vector with this replica's).
@Suite("Tombstone collection without the stable vector")
struct TombstoneCollectionTests {
    @Test("Over seeded random replicas, collecting by each tombstone's origin collects what the stable vector does")
    func agreesWithStableVector() {
        var collected = 0, kept = 0
        for seed in UInt64(1)...300 {
            var rng = SplitMix64(seed: seed)
            let replica = ReplicaFileCodecTests.randomReplica(&rng)
            var byVector = replica, byOrigin = replica
            let count = byVector.collectTombstones(coveredBy: byVector.stableVector)
            #expect(byOrigin.collectStableTombstones() == count, "seed \(seed)")
            #expect(byOrigin == byVector, "seed \(seed)")
            collected += count
            kept += byVector.entries.values.filter(\.isTombstone).count
        }
        // Both outcomes occur: the seeds test the rule, not only one side of it.
        #expect(collected > 20 && kept > 20)
    }
}
