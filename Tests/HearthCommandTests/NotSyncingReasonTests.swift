import Foundation
import Hearth
import HearthCore
import HearthDaemon
import HearthIdentity
import HearthSync
import Testing

/// Issue 27: a held store that does not sync says why. The daemon ("daemon: holding store …,")
/// and `hearth serve` ("serve … as …;") said "not syncing (signed out)" of every store without a
/// port, also of a signed-in store whose sync could not start. In-process, no engine runs.
@Suite struct NotSyncingReasonTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-notsyncing-\(UUID().uuidString)").path

    struct NoNetwork: Error, CustomStringConvertible { var description: String { "no network in this test" } }

    @Test("Signed in, a store whose sync cannot start is held saying why, not 'signed out'; stopped by the app, it says so")
    func cannotStartSaysWhy() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        var folders = DeviceFolders(accountDirectory: URL(fileURLWithPath: "\(root)/config"), storeDataDirectory: "\(root)/data")
        folders.caKeyScrypt = .testing
        let identity = try folders.accounts.createAccount(displayName: "Home", passphrase: "pw", deviceName: "lab")
        var access = StoreAccess(folders: folders, peering: PeerSettings(peers: ["127.0.0.1:9"], listenHost: "127.0.0.1"),
                                 storeIdentifier: "com.example.notes", identity: identity)
        // Signed in, but the device's engine cannot be made: its network fails to set up.
        var configuration = access.configuration(logLevel: .critical)
        configuration.sync.environment.network = { _ in throw NoNetwork() }
        let device = try HearthDevice(configuration)
        access.device = device
        let store = try device.store(access.storeIdentifier, configuration: configuration)
        #expect(!store.isSyncing)
        #expect(store.notSyncingReason == .cannotStart("no network in this test"))

        // What the daemon's and serve's first line says of it.
        let notes = Locked<[String]>([])
        let output = DaemonOutput(note: { line in notes.withLock { $0.append(line) } }, emit: { _ in })
        let hosted = try #require(try await HostedStore.open(access, label: "serve", output: output, opened: store, shouldStop: { false }))
        #expect(hosted.syncPort == nil)
        #expect(hosted.notSyncing == "not syncing: cannot start sync: no network in this test", "\(notes.withLock { $0 })")

        // Never started, there is nothing to resume; stopped by the app, it says so.
        #expect(!store.resumeSync())
        #expect(store.notSyncingReason == .cannotStart("no network in this test"))
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
}
