import Foundation
import Hearth
import HearthTestSupport
import HearthTesting
import Testing

@Suite("Stopping and resuming sync")
struct RestartTests {
    @Test("Replicas that stop and resume sync reconnect to everyone")
    func stopResume() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 3, linkTimeout: UnderLoad.linkTimeout,
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
    /// On the in-memory network, whose ports are taken and freed as TCP's are (a second bind
    /// of a held port fails): what leaks is the engine's, whatever the transport.
    @Test("Stopping sync at any moment of its start leaves the port free for the next start")
    func stopDuringStart() async throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["HEARTH_TEST_SEED"] ?? "") ?? UInt64.random(in: 0..<1_000_000)
        var rng = SplitMix64(seed: seed)
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let store = cluster[0]
            for round in 0..<60 {
                await store.stopSync()
                store.resumeSync()
                // Stop at a different point of the start each round: before, during, after the
                // bind, as a seeded number of turns given to the start's tasks decides.
                if round % 3 != 0 { for _ in 0..<(rng.next() % 40) { await Task.yield() } }
            }
            await store.stopSync()
            store.resumeSync()
            let port = try await store.syncPort()
            #expect(port == cluster.ports[0], "seed \(seed)")
            try await cluster.waitUntilConnected()
        }
    }
}

extension RestartTests {
    /// `hearth set` opens its store this way, so that a peer's first sync with it includes the
    /// write: when sync started at open, a busy machine could send the hello before the write,
    /// and a watching peer saw the write as a serverChange after an empty first sync.
    @Test("A store opened with sync paused syncs nothing until resumed, then its write reaches a new peer as its initial sync")
    func pausedStart() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let name = "com.example.paused"
            var paused = cluster.configuration(for: 0)
            paused.syncStartsPaused = true
            let writer = try UbiquitousKeyValueStore(storeIdentifier: name, configuration: paused)
            // Local copies: an #expect that fails reflects its operands, and a store holds a
            // noncopyable field that reflection cannot copy.
            let syncingAtOpen = writer.isSyncing
            #expect(!syncingAtOpen)
            try writer.setValue("hello", forKey: "greeting")
            let reader = try UbiquitousKeyValueStore(storeIdentifier: name, configuration: cluster.configuration(for: 1))
            let events = EventLog(reader)
            // The two devices are connected (the cluster's store), but this store is not synced yet,
            // not over three heartbeats after the reader opened (whichever end pings, the other
            // answers: device 1 receives each heartbeat as a ping or a pong).
            let beats = cluster[1].heartbeatsReceived
            try await cluster.until("three heartbeats at device 1") { cluster[1].heartbeatsReceived >= beats + 3 }
            let beforeResume = reader.value(forKey: "greeting")
            #expect(beforeResume == nil)
            let resumed = writer.resumeSync(), syncing = writer.isSyncing
            #expect(resumed && syncing)
            let first = await events.next(.initialSyncChange)
            #expect(first?.keys == ["greeting"])
            let received = reader.value(forKey: "greeting")
            #expect(received == "hello")
            #expect(events.all.allSatisfy { $0.reason == .initialSyncChange })
            await writer.internals.close()
            await reader.internals.close()
        }
    }
}
