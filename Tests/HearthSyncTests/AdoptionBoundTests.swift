import Foundation
import Logging
import Hearth
import HearthCore
import HearthIdentity
import HearthSync
import HearthTesting
import HearthTestSupport
import Testing

/// Issue 26, point 3, as logic: what a device daemon's `DeviceSync` makes of the stores peers
/// name (the live attack is `StoreAdoptionTests`).
@Suite("Stores a peer makes a daemon take up")
struct AdoptionBoundTests {
    /// `settings` on an in-memory network of their own: the tests need a running engine, no sockets.
    static func inMemory(_ settings: SyncSettings) -> SyncSettings {
        var settings = settings
        settings.environment = InMemoryNetwork().environment()
        return settings
    }

    /// A daemon's configuration under a new temporary `root`, its account ("daemon") created in
    /// `root/config`, syncing on an in-memory network of its own.
    static func daemon(_ name: String, logger: Logger = Logger(label: "test"),
                       writeBehindDelay: Duration? = nil) throws -> (root: String, configuration: UbiquitousKeyValueStore.Configuration) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-adopt-\(name)-\(UUID())").path
        let accounts = AccountStore(directory: URL(fileURLWithPath: "\(root)/config"), logger: Logger(label: "test"), scrypt: .testing)
        _ = try accounts.createAccount(displayName: "Bound", passphrase: "pw", deviceName: "daemon")
        var configuration = UbiquitousKeyValueStore.Configuration(
            dataDirectory: "\(root)/data", sync: Self.inMemory(SyncSettings(accountDirectory: "\(root)/config", discovery: .none, listenHost: "127.0.0.1")),
            logger: logger)
        if let writeBehindDelay { configuration.writeBehindDelay = writeBehindDelay }
        return (root, configuration)
    }

    @Test("While the daemon opens a store with its file (willOpen … didOpen), a peer naming it does not get it taken up in memory: the file's store could not attach then, and was held but not syncing")
    func noAdoptionWhileTheDaemonOpens() async throws {
        let (root, configuration) = try Self.daemon("open")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sync = try #require(try DeviceSync.start(configuration: configuration) { _ in nil })
        defer { Task { await sync.stop() } }
        let provide = try #require(sync.engine.storeProvider)
        let peer = try #require(DeviceID(bytes: Data(repeating: 7, count: 32)))

        // Taken up in memory for the peer; then an app asks the daemon for it (the race of the
        // daemon benchmark: the peer names it again between the claim and the file's attach).
        #expect(provide("com.example.open", peer) != nil)
        sync.willOpen("com.example.open")
        sync.claim("com.example.open")
        #expect(sync.engine.store("com.example.open") == nil, "the claim detaches the memory copy")
        #expect(provide("com.example.open", peer) == nil, "taken up again while the daemon opens it")
        #expect(sync.engine.store("com.example.open") == nil)
        // The open ended (here without a store): a peer naming it may have it taken up again.
        sync.didOpen("com.example.open")
        #expect(provide("com.example.open", peer) != nil)
    }

    @Test("A copy being taken up in memory that the daemon claims before it reaches the engine never attaches: the file's store the daemon opens next gets the engine (it found it taken, 1 daemon benchmark run in 20)")
    func claimBeforeTheMemoryCopyAttaches() async throws {
        let (root, configuration) = try Self.daemon("claim-window")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sync = try #require(try DeviceSync.start(configuration: configuration) { _ in nil })
        defer { Task { await sync.stop() } }
        let provide = try #require(sync.engine.storeProvider)
        let peer = try #require(DeviceID(bytes: Data(repeating: 7, count: 32)))

        // The peer names the store; between the copy's registration and its attach, an app asks
        // the daemon for it (as DeviceDaemon does: willOpen, then claim, whose detach finds nothing).
        sync.beforeMemoryAttach.withLock { $0 = { identifier in
            sync.willOpen(identifier)
            sync.claim(identifier)
        } }
        #expect(provide("com.example.window", peer) == nil, "the claimed copy is not served")
        sync.beforeMemoryAttach.withLock { $0 = nil }
        #expect(sync.engine.store("com.example.window") == nil, "no copy attached after the claim")
        #expect(sync.storesInMemory.isEmpty)
        // The daemon's open of the file's store finds the engine free.
        let file = MemoryReplica(storeIdentifier: "com.example.window")
        #expect(throws: Never.self) { try sync.engine.attach(file) }
        sync.didOpen("com.example.window")
    }

    @Test("A store whose file's copy cannot attach, as its memory copy serves a peer already, says why it does not sync: not 'signed out' (issue 27)")
    func unattachedStoreSaysWhy() async throws {
        let (root, configuration) = try Self.daemon("why")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sync = try #require(try DeviceSync.start(configuration: configuration) { _ in nil })
        let peer = try #require(DeviceID(bytes: Data(repeating: 7, count: 32)))
        let provide = try #require(sync.engine.storeProvider)
        #expect(provide("com.example.why", peer) != nil)
        // Opened with its file without the daemon's claim: the engine has the memory copy.
        let store = try UbiquitousKeyValueStore(storeIdentifier: "com.example.why", configuration: configuration)
        #expect(!store.isSyncing)
        #expect(store.internals.notSyncingReason == .cannotStart("store \"com.example.why\" is attached already"))
        await store.internals.close()
        await sync.stop()
    }

    @Test("At most 16 per peer, in memory (no file), one warning per peer a minute; another peer has its own 16; a store a local app claims, or a second member serves, frees a slot")
    func boundPerPeer() async throws {
        let logs = LogCapture()
        let (root, configuration) = try Self.daemon("bound", logger: logs.logger("daemon"))
        defer { try? FileManager.default.removeItem(atPath: root) }
        let opened = Locked<[String]>([])
        let sync = try #require(try DeviceSync.start(configuration: configuration) { identifier in
            opened.withLock { $0.append(identifier) }
            return nil
        })
        let provide = try #require(sync.engine.storeProvider)
        let (one, two) = (try #require(DeviceID(bytes: Data(repeating: 1, count: 32))), try #require(DeviceID(bytes: Data(repeating: 2, count: 32))))

        let first = (0..<20).map { provide("com.junk.one.\($0)", one) != nil }
        #expect(first == Array(repeating: true, count: 16) + Array(repeating: false, count: 4))
        #expect(sync.storesInMemory.count == 16)
        #expect(sync.engine.storeIdentifiers.count == 16)
        // The other peer's slots are its own.
        #expect((0..<16).allSatisfy { provide("com.junk.two.\($0)", two) != nil })
        #expect(provide("com.junk.two.16", two) == nil)
        // One warning per peer, whatever the number refused.
        #expect(logs.all.filter { $0.text.contains("stores no app here uses") }.count == 2)
        // Nothing on disk, nothing opened with a file.
        let files = FileManager.default.enumerator(atPath: "\(root)/data")?.compactMap { $0 as? String } ?? []
        #expect(files.filter { $0.contains("junk") }.isEmpty, "\(files)")
        #expect(opened.withLock { $0 }.isEmpty)
        // A local app opens one of the first peer's: it leaves memory and no longer counts.
        sync.claim("com.junk.one.3")
        #expect(sync.engine.store("com.junk.one.3") == nil)
        #expect(provide("com.junk.one.20", one) != nil)
        #expect(provide("com.junk.one.21", one) == nil)
        // A second member serves one of them: it no longer counts against the first (its own
        // word does not count, nor a store nobody took up).
        let served = try #require(sync.engine.onStoreServed)
        served("com.junk.one.5", one)
        served("com.unknown", two)
        #expect(provide("com.junk.one.22", one) == nil)
        served("com.junk.one.5", two)
        #expect(provide("com.junk.one.22", one) != nil)
        #expect(provide("com.junk.one.23", one) == nil)
        await sync.stop()
        #expect(sync.storesInMemory.isEmpty)
    }

    @Test("A store written to disk for a peer (it got a value) still counts against that peer after a restart; a local app's open forgives it")
    func boundSurvivesRestart() async throws {
        let (root, configuration) = try Self.daemon("restart", writeBehindDelay: .milliseconds(10))
        defer { try? FileManager.default.removeItem(atPath: root) }
        func start() throws -> DeviceSync {
            try #require(try DeviceSync.start(configuration: configuration) { identifier in
                try? UbiquitousKeyValueStore(storeIdentifier: identifier, configuration: configuration)
            })
        }
        let one = try #require(DeviceID(bytes: Data(repeating: 1, count: 32)))
        var sync = try start()
        // The peer's store gets a value (as the engine applies it once verified): written to disk.
        let replica = try #require(sync.engine.storeProvider?("com.real", one))
        let entry = Entry(key: StoreKey("k"), value: .string("v"), timestamp: HLCTimestamp(milliseconds: HybridLogicalClock.wallMilliseconds(), counter: 0),
                          origin: ReplicaID.random(boundTo: Data(repeating: 1, count: 32)), sequence: 1)
        _ = replica.applyRemote([entry], heldBack: [], reason: .serverChange)
        let written = await eventually("the store to be written for the peer") { sync.adoptedStores["com.real"] != nil && sync.storesInMemory.isEmpty }
        #expect(written)
        await sync.settle()
        // With what the memory copy held: no peer needs to send it again.
        #expect(sync.adoptedStores["com.real"]?.string(forKey: "k") == "v")
        #expect(FileManager.default.fileExists(atPath: sync.adoptedStores["com.real"]?.fileURL?.path ?? "/nonexistent"))
        await sync.adoptedStores["com.real"]?.internals.close()
        await sync.stop()

        // Restarted: the written store still counts, so 15 more, not 16.
        sync = try start()
        let provide = try #require(sync.engine.storeProvider)
        #expect((0..<15).allSatisfy { provide("com.junk.\($0)", one) != nil })
        #expect(provide("com.junk.15", one) == nil)
        // A local app opens it: the peer is forgiven it, for good.
        sync.claim("com.real", byApp: true)
        #expect(provide("com.junk.16", one) != nil)
        await sync.settle()
        await sync.stop()
        sync = try start()
        #expect((0..<16).allSatisfy { provide2 in sync.engine.storeProvider?("com.again.\(provide2)", one) != nil })
        await sync.stop()
    }
}
