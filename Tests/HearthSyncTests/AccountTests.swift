import Foundation
import Logging
import Hearth
import HearthIdentity
import HearthTestSupport
import HearthTesting
import Testing

@Suite("Signing in, switching and signing out")
struct AccountTests {
    static func directory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("hearth-account-\(UUID())").path
    }

    /// Opens the test store syncing over `network` (no sockets, no TLS).
    static func open(_ root: String, sync: SyncSettings, network: InMemoryNetwork) throws -> UbiquitousKeyValueStore {
        var sync = sync
        sync.environment = network.environment()
        return try UbiquitousKeyValueStore(storeIdentifier: "com.example.accounts",
                                           configuration: .init(dataDirectory: "\(root)/data", writeBehindDelay: .milliseconds(50), sync: sync))
    }

    @Test("Switching accounts replaces the set wholesale and posts accountChange with the keys that differ; signing out empties it")
    func switchAccounts() async throws {
        let root = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try await withCleanup { cleanup in
            let network = InMemoryNetwork()
            let accounts = AccountStore(directory: URL(fileURLWithPath: "\(root)/config"), logger: Logger(label: "test"), scrypt: .testing)
            let y = try accounts.createAccount(displayName: "Household Y", passphrase: "pw", deviceName: "laptop").account.id
            let store = try Self.open(root, sync: SyncSettings(accountDirectory: "\(root)/config", discovery: .none, listenHost: "127.0.0.1"), network: network)
            cleanup { await store.stopSync(); store.synchronize() }
            #expect(store.accountID == y.hex)
            let events = EventLog(store)
            store.set(Int64(3), forKey: "c")
            store.set(Int64(2), forKey: "b")

            let x = try accounts.createAccount(displayName: "Household X", passphrase: "pw", deviceName: "laptop").account.id   // signs in to X
            let toX = await events.next(.accountChange)
            #expect(Set(toX?.keys ?? []) == ["b", "c"])
            #expect(store.accountID == x.hex)
            #expect(store.dictionaryRepresentation.isEmpty)
            store.set(Int64(1), forKey: "a")
            store.set(Int64(2), forKey: "b")

            try accounts.switchAccount(to: y)
            let toY = await events.next(.accountChange)
            #expect(Set(toY?.keys ?? []) == ["a", "c"])                         // b is 2 in both
            #expect(store.values == ["b": 2, "c": 3])

            try accounts.signOut()
            let out = await events.next(.accountChange)
            #expect(Set(out?.keys ?? []) == ["b", "c"])
            #expect(store.accountID == nil)
            #expect(store.values.isEmpty)
        }
    }

    @Test("First sign-in: signed-out writes survive by timestamp, and the first download posts initialSyncChange")
    func firstSignIn() async throws {
        let root = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try await withCleanup { cleanup in
            let network = InMemoryNetwork()
            // Device A: in the account, with data.
            let accountsA = AccountStore(directory: URL(fileURLWithPath: "\(root)/a/config"), logger: Logger(label: "test"), scrypt: .testing)
            let owner = try accountsA.createAccount(displayName: "Household", passphrase: "pw", deviceName: "A")
            let portA = network.reservePort(), portB = network.reservePort()
            let a = try Self.open("\(root)/a", sync: SyncSettings(accountDirectory: "\(root)/a/config", discovery: .staticPeers(["127.0.0.1:\(portB)"]),
                                                                   listenHost: "127.0.0.1", port: portA), network: network)
            // Device B: signed out, writes offline.
            let b = try Self.open("\(root)/b", sync: SyncSettings(accountDirectory: "\(root)/b/config", discovery: .staticPeers(["127.0.0.1:\(portA)"]),
                                                                   listenHost: "127.0.0.1", port: portB), network: network)
            cleanup { await a.stopSync(); await b.stopSync() }
            #expect(b.accountID == nil && !b.isSyncing)
            b.set("B's older", forKey: "both")
            b.set("offline", forKey: "local")
            await b.pastStamp(of: "both")
            a.set("A's newer", forKey: "both")
            a.set("from A", forKey: "shared")
            await a.pastStamp(of: "both")
            b.set("B's newest", forKey: "newest")

            let events = EventLog(b)
            let bundle = try accountsA.exportJoinBundle(owner.account.id)
            _ = try AccountStore(directory: URL(fileURLWithPath: "\(root)/b/config"), logger: Logger(label: "test"), scrypt: .testing).importJoinBundle(bundle, passphrase: "pw", deviceName: "B")
            let initial = await events.next(.initialSyncChange)
            #expect(Set(initial?.keys ?? []) == ["both", "shared"])
            let expected: [String: PropertyListValue] = ["both": "A's newer", "shared": "from A", "local": "offline", "newest": "B's newest"]
            try await network.until("A and B to converge") { a.values == expected && b.values == expected }
            #expect(b.accountID == owner.account.id.hex)
        }
    }

    @Test("Strict mode: before the first download, writes are refused and reported as initialSyncChange")
    func strictMode() async throws {
        let root = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try await withCleanup { cleanup in
            let network = InMemoryNetwork()
            let accounts = AccountStore(directory: URL(fileURLWithPath: "\(root)/config"), logger: Logger(label: "test"), scrypt: .testing)
            _ = try accounts.createAccount(displayName: "Household", passphrase: "pw", deviceName: "alone")
            var settings = SyncSettings(accountDirectory: "\(root)/config", discovery: .none, listenHost: "127.0.0.1")
            settings.discardWritesBeforeInitialSync = true
            let store = try Self.open(root, sync: settings, network: network)
            cleanup { await store.stopSync() }
            let events = EventLog(store)
            store.set("too early", forKey: "k")
            #expect(store.object(forKey: "k") == nil)
            let refused = await events.next(.initialSyncChange)
            #expect(refused?.keys == ["k"])
            #expect(throws: KeyValueStoreError.self) { try store.setValue("too early", forKey: "k") }
        }
    }
}
