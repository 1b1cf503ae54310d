import Foundation
import Hearth
import HearthCore
import HearthDaemon
import HearthIdentity
import Testing

/// Issue 27: `hearth set` through a store an app holds. The app hosts the store; `set` finds no
/// control socket and attaches to it (StoreAccess.reach), so its write is synced, and answered
/// by peers, in the app. In-process: the app is a device of this process with the same folders.
@Suite struct AttachedSetOutcomeTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-attachedset-\(UUID().uuidString)").path

    @Test("hearth set through an app-held store of a signed-in device says the app syncs it, not 'signed out'")
    func attachedSetSaysWhoSyncs() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        var folders = DeviceFolders(accountDirectory: URL(fileURLWithPath: "\(root)/config"), storeDataDirectory: "\(root)/data")
        folders.caKeyScrypt = .testing
        let identity = try folders.accounts.createAccount(displayName: "Home", passphrase: "pw", deviceName: "lab")
        let peering = PeerSettings(peers: ["127.0.0.1:9"], listenHost: "127.0.0.1")
        // The app: holds and hosts the store, syncing it.
        let app = StoreAccess(folders: folders, peering: peering, storeIdentifier: "com.example.notes", identity: identity)
        let appDevice = try HearthDevice(app.configuration(logLevel: .critical))
        let held = try appDevice.store(app.storeIdentifier, configuration: app.configuration(logLevel: .critical))
        #expect(held.isSyncing)
        // `hearth set`, on a device of its own as a command is.
        var command = app
        let commandDevice = try HearthDevice(app.configuration(logLevel: .critical))
        command.device = commandDevice
        let (outcome, route) = try await WriteRequest(store: app.storeIdentifier, key: "color", value: .string("teal"), wait: 0, minimumPeers: 1).perform(command)
        #expect(route == .here)
        #expect(held.string(forKey: "color") == "teal")
        #expect(!outcome.sentence.contains("signed out"), "\(outcome.sentence)")
        #expect(outcome.sentence.contains("the process that holds the store syncs it"), "\(outcome.sentence)")
        await commandDevice.stop()
        await appDevice.stop()
    }
}
