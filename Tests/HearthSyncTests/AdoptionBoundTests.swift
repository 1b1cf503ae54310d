import Foundation
import Logging
import Hearth
import HearthCore
import HearthIdentity
import HearthSync
import HearthTesting
import Testing

/// Issue 26, point 3, as logic: what a device daemon's `DeviceSync` makes of the stores peers
/// name (the live attack is `StoreAdoptionTests`).
@Suite("Stores a peer makes a daemon take up")
struct AdoptionBoundTests {
    @Test("At most 16 per peer, in memory (no file), one warning per peer a minute; another peer has its own 16; a store a local app claims frees a slot")
    func boundPerPeer() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-adopt-bound-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let accounts = AccountStore(directory: URL(fileURLWithPath: "\(root)/config"), logger: Logger(label: "test"), scrypt: .testing)
        _ = try accounts.createAccount(displayName: "Bound", passphrase: "pw", deviceName: "daemon")
        let logs = LogCapture()
        let configuration = UbiquitousKeyValueStore.Configuration(
            dataDirectory: "\(root)/data", sync: SyncSettings(accountDirectory: "\(root)/config", discovery: .none, listenHost: "127.0.0.1"),
            logger: logs.logger("daemon"))
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
        await sync.stop()
        #expect(sync.storesInMemory.isEmpty)
    }
}
