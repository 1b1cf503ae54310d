import Foundation
import Hearth
import HearthTestSupport
import HearthTesting
import Testing

@Suite("Quotas and merges")
struct QuotaMergeTests {
    @Test("Offline writes that together exceed the quota still merge identically; then only shrinking writes pass")
    func mergeOverQuota() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, storeIdentifier: "com.example.quota", linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let (a, b) = (cluster[0], cluster[1])
            try await cluster.waitUntilConnected()
            await b.stopSync()
            try await cluster.until("A to see B gone") { a.connectedPeerCount == 0 }
            try a.setValue(.data(Data(count: 700_000)), forKey: "a")      // each fits alone
            try b.setValue(.data(Data(count: 700_000)), forKey: "b")
            b.resumeSync()
            try await cluster.waitUntilConverged(timeout: .seconds(15))
            #expect(a.values.count == 2 && b.values.count == 2)
            #expect(a.usage.bytes > StoreLimits.maximumTotalSize)         // over quota, identically
            #expect(a.usage == b.usage)

            do throws(KeyValueStoreError) {           // stated: in a closure, a do block does not infer it
                try a.setValue("grows", forKey: "c")
                Issue.record("a growing write passed in an over-quota store")
            } catch {
                #expect(error.code == .storeFull)
            }
            try a.setValue(.data(Data(count: 10)), forKey: "b")           // shrinks: allowed
            try a.removeValue(forKey: "a")                                 // allowed
            try a.setValue("fits again", forKey: "c")
            try await cluster.waitUntilConverged(expected: ["b": .data(Data(count: 10)), "c": "fits again"])
        }
    }
}
