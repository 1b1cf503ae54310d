import Foundation
import Hearth
import Testing

@Suite("Stopping and resuming sync")
struct RestartTests {
    @Test("Replicas that stop and resume sync reconnect to everyone")
    func stopResume() async throws {
        let cluster = try await SyncCluster(count: 3)
        defer { Task { await cluster.shutdown() } }
        try await cluster.waitUntilConnected([2, 2, 2])
        for round in 0..<3 {
            await cluster.stores[0].stopSync()
            await cluster.stores[1].stopSync()
            cluster.stores[2].set(Int64(round), forKey: "r")
            cluster.stores[0].resumeSync()
            cluster.stores[1].resumeSync()
            try await cluster.waitUntilConnected([2, 2, 2])
            try await cluster.waitUntilConverged(expected: ["r": .integer(Int64(round))])
        }
    }
}
