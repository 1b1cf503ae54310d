import Foundation
import Hearth
import HearthCore
import HearthTestSupport
import HearthTesting
import Testing

@Suite("Partitions, deletes and tombstones")
struct PartitionTests {
    @Test("Deletes during a partition do not resurrect after healing, and tombstones are then collected")
    func deletesSurvivePartition() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 3, storeIdentifier: "com.example.partition", linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let (a, b, c) = (cluster[0], cluster[1], cluster[2])
            try await cluster.waitUntilConnected()
            a.set("x", forKey: "x")
            a.set("y", forKey: "y")
            try await cluster.waitUntilConverged(expected: ["x": "x", "y": "y"])

            await c.stopSync()                                   // partition C off
            try await cluster.until("A and B to see C gone") { a.connectedPeerCount == 1 && b.connectedPeerCount == 1 }
            c.set("C's stale edit", forKey: "x")                 // older than A's delete below
            await c.pastStamp(of: "x")
            a.removeObject(forKey: "x")                          // the delete wins by timestamp
            c.set("C's edit", forKey: "y")
            try await cluster.until("B to apply the delete") { b.object(forKey: "x") == nil }

            c.resumeSync()                                       // heal
            try await cluster.waitUntilConverged(expected: ["y": "C's edit"])
            #expect(cluster.stores.allSatisfy { $0.object(forKey: "x") == nil })

            // Every peer has acknowledged the tombstone (heartbeats carry vectors): it is collected.
            // Twice in ThreadSanitizer runs of CI one store kept it: a collector dropped the
            // origin's counter (fixed, see ReplicaTests). Should it happen again, say which
            // store kept it and what it knew of the others.
            try await cluster.until("tombstones to be collected: \(Self.tombstoneReport(cluster.stores, key: "x"))") {
                cluster.stores.allSatisfy { $0.internals.replica.entries["x"] == nil }
            }
            #expect(cluster.stores.allSatisfy { $0.internals.replica.entries["y"] != nil })
        }
    }

    /// Per store: whether it still holds the tombstone of `key` (its origin and sequence), how
    /// many peers it is connected to, its vector and what it knows of its peers' vectors.
    static func tombstoneReport(_ stores: [UbiquitousKeyValueStore], key: StoreKey) -> String {
        stores.enumerated().map { index, store in
            let replica = store.internals.replica
            let tombstone = replica.entries[key].map { "kept (\($0.origin)#\($0.sequence))" } ?? "collected"
            let peers = replica.peerVectors.sorted { $0.key < $1.key }.map { "\($0.key.prefix(8)): \($0.value)" }.joined(separator: ", ")
            return "store \(index): tombstone \(tombstone), \(store.connectedPeerCount) peers connected, vector \(replica.vector), peers [\(peers)]"
        }.joined(separator: "; ")
    }

    @Test("A device that returns to a newcomer that never met it does not bring back a deleted key")
    func returningDeviceMeetsNewcomer() async throws {
        // B meets D and, later, S; S and D never meet until D comes back, and then only each other.
        let (b, d, s) = (0, 1, 2)
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 3, storeIdentifier: "com.example.returning", topology: .links([(b, d), (b, s)]),
                                      linkTimeout: UnderLoad.linkTimeout, connectTimeout: UnderLoad.connectTimeout) { cluster in
            let stores = cluster.stores
            await stores[s].stopSync()                           // S leaves before anything is written
            try await cluster.waitUntilConnected([1, 1, 0])
            stores[d].set("first", forKey: "k")
            try await cluster.until("B to have D's value") { stores[b].string(forKey: "k") == "first" }

            await stores[d].stopSync()                           // D goes away…
            stores[d].set("D's stale edit", forKey: "k")         // …and edits k, which nobody sees
            await stores[d].pastStamp(of: "k")
            stores[b].removeObject(forKey: "k")                  // a later delete, which wins

            stores[s].resumeSync()                               // S joins and gets the tombstone from B
            try await cluster.waitUntilConnected([1, 0, 1])
            try await cluster.until("S to have the delete") { stores[s].internals.replica.entries["k"]?.isTombstone == true }
            // B knows D, so S learns of D from B's hello and keeps the tombstone for D: without that,
            // S would collect it at B's next heartbeat, and D's stale edit would come back through S.
            // Three heartbeats from B (they carry its vectors) show it.
            let beats = stores[s].heartbeatsReceived
            try await cluster.until("S to receive three heartbeats from B") { stores[s].heartbeatsReceived >= beats + 3 }
            #expect(stores[s].internals.replica.entries["k"]?.isTombstone == true, "S collected the tombstone D lacks")

            await stores[b].stopSync()                           // D comes back and meets only S
            stores[d].resumeSync()
            stores[d].addSyncPeer(host: "127.0.0.1", port: cluster.ports[s])
            try await cluster.until("D and S to connect") { stores[s].connectedPeerCount == 1 && stores[d].connectedPeerCount == 1 }
            try await cluster.waitUntilConverged([d, s], expected: [:])
            stores[b].resumeSync()
            try await cluster.waitUntilConverged(expected: [:])
            // Now that D has it too, S may drop the tombstone.
            try await cluster.until("S to collect the tombstone once D has it") { stores[s].internals.replica.entries["k"] == nil }
        }
    }

    @Test("Reconnecting after 1 key of 1,000 changed sends one entry, not the store")
    func reconnectDelta() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let (a, b) = (cluster[0], cluster[1])
            try await cluster.waitUntilConnected()
            for i in 0..<1000 { a.set("value \(i)", forKey: "key\(i)") }
            // One delta of 1,000 signed entries: under ThreadSanitizer with 4 CPU hogs it took over
            // 10 s (streak run H2 at f1d36ce); what this test measures is the reconnection after.
            try await cluster.waitUntilConverged(timeout: .seconds(90))
            #expect(b.values.count == 1000)

            await b.stopSync()
            try await cluster.until("A to see B gone") { a.connectedPeerCount == 0 }
            a.set("changed", forKey: "key500")
            let before = try #require(a.syncMetrics)
            b.resumeSync()
            try await cluster.until("B to receive the change") { b.string(forKey: "key500") == "changed" }
            // B's ack back at A: every message of the exchange is counted by then.
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            let after = try #require(a.syncMetrics)
            let bMetrics = try #require(b.syncMetrics)
            // One entry per connection. Usually one connection; when both ends redial at the same
            // instant, two may pass the hello before the duplicate rule closes one.
            // Each end counts the connections that passed its own duplicate rule, which may differ.
            let sessions = bMetrics.sessions, aSessions = after.sessions - before.sessions
            #expect((1...2).contains(sessions) && (1...2).contains(aSessions))
            // (The second connection's hello may already show the entry the first one brought.)
            #expect((1...max(aSessions, 1)).contains(after.entriesSent - before.entriesSent))
            #expect((1...sessions).contains(bMetrics.entriesReceived))
            // Hello + one-entry delta + acks and pings: far below the ~30 KB of the whole store.
            #expect(bMetrics.bytesReceived < 2048 * sessions, "B received \(bMetrics.bytesReceived) bytes over \(sessions) connection(s)")
        }
    }
}
