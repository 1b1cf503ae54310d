import Foundation
import Hearth
import HearthTestSupport
import HearthTesting
import Testing

@Suite("Randomized convergence")
struct RandomizedTests {
    @Test("6 replicas, thousands of random writes, deletes, disconnects and reconnects: all end equal")
    func sixReplicas() async throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["HEARTH_TEST_SEED"] ?? "") ?? UInt64.random(in: 0..<1_000_000)
        var rng = SplitMix64(seed: seed)
        // Said first: a wait that throws (no convergence) ends the test before the check that names it.
        print("randomized convergence: seed \(seed) (HEARTH_TEST_SEED)")
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 6, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            try await cluster.waitUntilConnected()
            var offline = Set<Int>()
            for step in 0..<3000 {
                let i = Int(rng.next() % 6)
                let store = cluster[i]
                switch rng.next() % 100 {
                case 0..<60: store.set(Int64(step), forKey: "k\(rng.next() % 40)")
                case 60..<80: store.removeObject(forKey: "k\(rng.next() % 40)")
                case 80..<90: store.set(["step": step, "by": i] as [String: Any], forKey: "d\(rng.next() % 5)")
                case 90..<95 where !offline.contains(i) && offline.count < 3:
                    await store.stopSync()
                    offline.insert(i)
                case 95..<100 where offline.contains(i):
                    store.resumeSync()
                    offline.remove(i)
                default: break
                }
                // Now and then, let the sessions run between the writes (yields, not a timer).
                if step % 100 == 0 { for _ in 0..<32 { await Task.yield() } }
            }
            for i in offline { cluster[i].resumeSync() }
            try await cluster.waitUntilConnected(timeout: .seconds(20))
            try await cluster.waitUntilConverged(timeout: .seconds(20))
            let representations = cluster.stores.map { $0.values }
            #expect(representations.allSatisfy { $0 == representations[0] }, "diverged; rerun with HEARTH_TEST_SEED=\(seed)")
            #expect(!representations[0].isEmpty)
            print("randomized convergence: seed \(seed), \(representations[0].count) keys on 6 replicas")
        }
    }
}
