import Foundation
import Hearth
import HearthCore
import HearthTestSupport
import HearthTesting
import Testing

@Suite("Randomized convergence with restarts")
struct RestartSoakTests {
    @Test("4 replicas: random writes, deletes, partitions and restarts from disk; all end equal")
    func restartsAndPartitions() async throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["HEARTH_TEST_SEED"] ?? "") ?? UInt64.random(in: 0..<1_000_000)
        var rng = SplitMix64(seed: seed)
        // Said first: a wait that throws (no convergence) ends the test before the check that names it.
        print("restart soak: seed \(seed) (HEARTH_TEST_SEED)")
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 4, storeIdentifier: "com.example.soak") { cluster in
            var isolated = Set<Int>()
            var restarts = 0
            for step in 0..<800 {
                let i = Int(rng.next() % 4)
                switch rng.next() % 100 {
                case 0..<60: try cluster.write(.integer(Int64(step)), forKey: "k\(rng.next() % 20)", on: i)
                case 60..<85: try cluster.write(nil, forKey: "k\(rng.next() % 20)", on: i)
                case 85..<91 where !isolated.contains(i) && isolated.count < 2:
                    await cluster.isolate(i)
                    isolated.insert(i)
                case 91..<96 where !isolated.isEmpty:
                    try await cluster.heal()
                    isolated = []
                case 96..<100 where restarts < 8:
                    // A restart reconnects the replica (and waits for every connected one).
                    try await cluster.restart(i)
                    isolated.remove(i)
                    restarts += 1
                default: break
                }
                // Now and then, let the sessions run between the writes (yields, not a timer).
                if step % 50 == 0 { for _ in 0..<32 { await Task.yield() } }
            }
            try await cluster.heal()
            try await cluster.waitUntilConverged(timeout: .seconds(20))
            let values = cluster.stores.map(\.values)
            #expect(values.allSatisfy { $0 == values[0] }, "diverged; rerun with HEARTH_TEST_SEED=\(seed)")
            print("restart soak: seed \(seed), \(restarts) restarts, \(values[0].count) keys on 4 replicas")
        }
    }
}
