import Foundation
import Hearth
import HearthCore
import HearthDaemon
import HearthIdentity
import HearthSync
import Testing

/// Issue 27: a held store that does not sync says why. The daemon ("daemon: holding store …,")
/// and `hearth serve` ("serve … as …;") said "not syncing (signed out)" of every store without a
/// port, also of a signed-in store whose sync could not start; `hearth set` said "signed out:
/// not synced" of a write through a store an app holds. In-process.
@Suite struct NotSyncingReasonTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-notsyncing-\(UUID().uuidString)").path

    struct NoNetwork: Error, CustomStringConvertible { var description: String { "no network in this test" } }

    /// A store of a device signed in to a new account; its one peer, a static one, never answers.
    func signedIn() throws -> StoreAccess {
        var folders = DeviceFolders(accountDirectory: URL(fileURLWithPath: "\(root)/config"), storeDataDirectory: "\(root)/data")
        folders.caKeyScrypt = .testing
        let identity = try folders.accounts.createAccount(displayName: "Home", passphrase: "pw", deviceName: "lab")
        return StoreAccess(folders: folders, peering: PeerSettings(peers: ["127.0.0.1:9"], listenHost: "127.0.0.1"),
                           storeIdentifier: "com.example.notes", identity: identity)
    }

    @Test("Signed in, a store whose sync cannot start is held saying why, not 'signed out'; stopped by the app, it says so")
    func cannotStartSaysWhy() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        var access = try signedIn()
        // Signed in, but the device's engine cannot be made: its network fails to set up.
        var configuration = access.configuration(logLevel: .critical)
        configuration.sync.environment.network = { _ in throw NoNetwork() }
        let device = try HearthDevice(configuration)
        access.device = device
        let store = try device.store(access.storeIdentifier, configuration: configuration)
        #expect(!store.isSyncing)
        #expect(store.internals.notSyncingReason == .cannotStart("no network in this test"))

        // What the daemon's and serve's first line says of it.
        let notes = Locked<[String]>([])
        let output = DaemonOutput(note: { line in notes.withLock { $0.append(line) } }, emit: { _ in })
        let hosted = try #require(try await HostedStore.open(access, label: "serve", output: output, opened: store, shouldStop: { false }))
        #expect(hosted.syncPort == nil)
        #expect(hosted.notSyncing == "not syncing: cannot start sync: no network in this test", "\(notes.withLock { $0 })")

        // Never started, there is nothing to resume; stopped by the app, it says so.
        #expect(!store.resumeSync())
        #expect(store.internals.notSyncingReason == .cannotStart("no network in this test"))
        await store.stopSync()
        #expect(hosted.notSyncing == "not syncing (paused by the app)")
        await hosted.close()
        await device.stop()
    }

    @Test("Signed out, a held store says 'not syncing (signed out)', as before")
    func signedOutSaysSo() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folders = DeviceFolders(accountDirectory: URL(fileURLWithPath: "\(root)/config"), storeDataDirectory: "\(root)/data")
        var access = StoreAccess(folders: folders, peering: PeerSettings(), storeIdentifier: "com.example.notes", identity: nil)
        let device = try HearthDevice(access.configuration(logLevel: .critical))
        access.device = device
        let hosted = try #require(try await HostedStore.open(access, label: "serve", output: DaemonOutput(note: { _ in }, emit: { _ in }),
                                                             shouldStop: { false }))
        #expect(hosted.notSyncing == "not syncing (signed out)")
        await hosted.close()
        await device.stop()
    }

    @Test("hearth set through an app-held store of a signed-in device says the app syncs it, not 'signed out'")
    func attachedSetSaysWhoSyncs() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        // The app: holds and hosts the store, syncing it. `hearth set` finds no control socket
        // and attaches to it (StoreAccess.reach): the app syncs its write and hears the peers.
        let app = try signedIn()
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
