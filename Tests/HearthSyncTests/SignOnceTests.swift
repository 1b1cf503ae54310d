import Foundation
import Hearth
import HearthCore
import HearthTesting
import Testing

/// A change is signed once, however many sessions send it (issue 27: a writer in an 8-device
/// mesh signed 1.53 times per change, as a session that found another signing went on and
/// signed the same writes again in `SyncStore.signed(_:)`).
@Suite("Signed once")
struct SignOnceTests {
    @Test("A writer in an 8-device mesh signs each of 60 changes once, though 7 sessions send each")
    func eightDeviceMesh() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 8, storeIdentifier: "com.example.signonce", linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            try await cluster.waitUntilConnected()
            let before = try #require(cluster[0].syncMetrics).entriesSigned
            let changes = 60
            // One change at a time, as the latency benchmark makes them: every session of the
            // writer wakes for each, and all 7 would sign it if they did not wait for one signer.
            for index in 0..<changes {
                try cluster.write(.integer(Int64(index)), forKey: "k\(index)", on: 0)
                try await cluster.waitUntilConverged()
            }
            let signed = try #require(cluster[0].syncMetrics).entriesSigned - before
            #expect(signed == changes, "\(signed) signatures for \(changes) changes")
            // The others only relay or receive: they sign nothing.
            for index in 1..<cluster.count {
                #expect(cluster[index].syncMetrics?.entriesSigned == 0, "device \(index) signed something")
            }
        }
    }
}
