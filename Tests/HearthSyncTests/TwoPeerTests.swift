import Foundation
import Hearth
import HearthCore
import Testing

@Suite("Two peers")
struct TwoPeerTests {
    @Test("A set on one raises serverChange with that key on the other, and the value matches")
    func setPropagates() async throws {
        let cluster = try await SyncCluster(count: 2)
        defer { Task { await cluster.shutdown() } }
        let (a, b) = (cluster.stores[0], cluster.stores[1])
        try await cluster.waitUntilConnected([1, 1])
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

@Suite("synchronize() with sync")
struct SynchronizeTests {
    @Test("synchronize() saves to disk and the peer has the value")
    func synchronizeSavesAndPushes() async throws {
        let cluster = try await SyncCluster(count: 2, storeIdentifier: "com.example.synchronize")
        defer { Task { await cluster.shutdown() } }
        let (a, b) = (cluster.stores[0], cluster.stores[1])
        try await cluster.waitUntilConnected([1, 1])
        a.set("now", forKey: "k")
        #expect(a.synchronize())
        let file = try #require(a.fileURL)
        let onDisk = try ReplicaFile.decode(try Data(contentsOf: file), path: file.path).replica
        #expect(onDisk.value(forKey: "k") == "now")
        #expect(await a.waitUntilSynced(peers: 1, timeout: .seconds(5)))
        #expect(b.string(forKey: "k") == "now")
    }
}
