import Foundation
import Hearth
import HearthTesting
import Testing

@Suite("Stopping and resuming sync")
struct RestartTests {
    @Test("Replicas that stop and resume sync reconnect to everyone")
    func stopResume() async throws {
        try await withLoopbackCluster(replicas: 3, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            try await cluster.waitUntilConnected()
            for round in 0..<3 {
                await cluster[0].stopSync()
                await cluster[1].stopSync()
                cluster[2].set(Int64(round), forKey: "r")
                cluster[0].resumeSync()
                cluster[1].resumeSync()
                try await cluster.waitUntilConnected()
                try await cluster.waitUntilConverged(expected: ["r": .integer(Int64(round))])
            }
        }
    }
}

extension RestartTests {
    /// A stop that lands while the engine is still binding its listener must close that
    /// listener too: a leaked one keeps the fixed port, and every later start fails to bind.
    @Test("Stopping sync at any moment of its start leaves the port free for the next start")
    func stopDuringStart() async throws {
        try await withLoopbackCluster(replicas: 2, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let store = cluster[0]
            for round in 0..<60 {
                await store.stopSync()
                store.resumeSync()
                // Stop at a different point of the start each round: before, during, after the bind.
                if round % 3 != 0 { try await Task.sleep(for: .microseconds(Int.random(in: 0...3_000))) }
            }
            await store.stopSync()
            store.resumeSync()
            let port = try await store.syncPort()
            #expect(port == cluster.ports[0])
            try await cluster.waitUntilConnected()
        }
    }
}
