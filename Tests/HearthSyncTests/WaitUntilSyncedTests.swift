import Foundation
@testable import Hearth
import HearthCore
import HearthTesting
import Testing

/// `waitUntilSynced` is woken by the engine (a peer connected, acknowledged or refused) and by
/// the store (its engine started or stopped), not by a poll (issue 27, point 5). Its deadline is
/// far away here: a wait that missed its wake-up would end at the deadline, and the tests check
/// that it ended well before.
@Suite("waitUntilSynced waits for an event")
struct WaitUntilSyncedTests {
    static let far = Duration.seconds(60)

    /// Two connected devices syncing one store on the in-memory network (the waits are the
    /// store's and the engine's, whatever the transport): `body` gets each one's store.
    static func withTwoDevices(_ body: (UbiquitousKeyValueStore, UbiquitousKeyValueStore) async throws -> Void) async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, storeIdentifier: "com.example.waiting", linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            try await cluster.waitUntilConnected()
            try await body(cluster[0], cluster[1])
        }
    }

    @Test("A write is confirmed by the peer: waitUntilSynced returns on the peer's ack, well before its deadline")
    func returnsOnAck() async throws {
        try await Self.withTwoDevices { a, b in
            #expect(await a.waitUntilSynced(timeout: Self.far))
            // The peer has not got this one yet: only its ack can end the wait.
            a.set("now", forKey: "k")
            let start = ContinuousClock.now
            #expect(await a.waitUntilSynced(timeout: Self.far))
            #expect(ContinuousClock.now - start < Self.far)
            #expect(b.string(forKey: "k") == "now")
        }
    }

    @Test("A wait begun while the store does not sync follows the engine started later")
    func followsANewEngine() async throws {
        try await Self.withTwoDevices { a, b in
            await a.stopSync()
            a.set("later", forKey: "k")
            let start = ContinuousClock.now
            let waiting = Task { await a.waitUntilSynced(timeout: Self.far) }
            // Asleep on the store's signal (no engine to follow yet) before sync resumes.
            while a.backend.syncChanges.waiting == 0 { await Task.yield() }
            #expect(a.resumeSync())
            #expect(await waiting.value)
            #expect(ContinuousClock.now - start < Self.far)
            #expect(b.string(forKey: "k") == "later")
        }
    }
}
