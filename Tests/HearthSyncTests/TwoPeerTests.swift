import Foundation
import Hearth
import HearthCore
import HearthTesting
import Testing

@Suite("Two peers")
struct TwoPeerTests {
    @Test("A set on one raises serverChange with that key on the other, and the value matches")
    func setPropagates() async throws {
        try await withLoopbackCluster(replicas: 2, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let (a, b) = (cluster[0], cluster[1])
            try await cluster.waitUntilConnected()
            let changes = b.changes
            a.set(2, forKey: "backgroundColor")
            var iterator = changes.makeAsyncIterator()
            var event = await iterator.next()
            // The initial exchange of two empty stores posts nothing; the first event is the change.
            if event?.reason == .initialSyncChange, event?.keys.isEmpty == true { event = await iterator.next() }
            #expect(event?.keys == ["backgroundColor"])
            #expect(event?.reason == .serverChange || event?.reason == .initialSyncChange)
            #expect(b.longLong(forKey: "backgroundColor") == 2)
            #expect(b.object(forKey: "backgroundColor") as? Int == 2)
        }
    }
}

@Suite("synchronize() with sync")
struct SynchronizeTests {
    /// On the in-memory network: what it shows is the store's (the save, the wait for the ack);
    /// `TwoPeerTests` is the end-to-end run of two stores over TLS.
    @Test("synchronize() saves to disk and the peer has the value")
    func synchronizeSavesAndPushes() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, storeIdentifier: "com.example.synchronize", linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let (a, b) = (cluster[0], cluster[1])
            try await cluster.waitUntilConnected()
            a.set("now", forKey: "k")
            #expect(a.synchronize())
            let file = try #require(a.fileURL)
            let onDisk = try ReplicaFile.decode(try Data(contentsOf: file), path: file.path).replica
            #expect(onDisk.value(forKey: "k") == "now")
            #expect(await a.waitUntilSynced(peers: 1, timeout: .seconds(30)))
            #expect(b.string(forKey: "k") == "now")
        }
    }
}
