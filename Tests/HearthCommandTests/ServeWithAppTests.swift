import Foundation
import Hearth
import HearthTestSupport
import HearthTesting
import Testing

/// Issue 13: `hearth watch`/`serve` and an app on the same store, on one device. The command owns
/// the store and hosts it; the app attaches (docs/local-attach.md), and when the command stops,
/// the app takes the store over.
@Suite struct ServeWithAppTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-serve-app-\(UUID().uuidString)").path

    @Test("hearth watch holds the store, an app attaches: each sees the other's writes as serverChange; the app takes over when watch stops",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func watchAndApp() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let device = try await Device.alone(root: root)
        let watch = try await HearthCLI.serve(device, ["watch", "--create"])
        defer { watch.kill() }

        // The app: same store, same account, its own sync settings; the store is held by watch.
        var sync = SyncSettings(accountDirectory: device.config, discovery: .none, listenHost: "127.0.0.1")
        sync.port = 0
        let app = try UbiquitousKeyValueStore(storeIdentifier: "com.example.colors",
                                              configuration: .init(dataDirectory: device.data, sync: sync))
        #expect(app.internals.isAttached)
        let changes = app.changes

        // The app's write reaches watch, which prints it as another process's change.
        try app.setValue(.integer(2), forKey: "backgroundColor")
        #expect(await watch.waitForOutput("serverChange (0): backgroundColor = 2"), "\(watch.output)\(watch.errorOutput)")

        // A write handed to watch (hearth set, control socket) reaches the app as serverChange.
        let set = try await HearthCLI.run(["set", "greeting", "--string", "hello", "--wait", "0"] + device.store + device.directories)
        #expect(set.status == 0, "\(set.error)")
        let first = Task { () -> ChangeEvent? in
            for await change in changes { return change }
            return nil
        }
        #expect(await first.bounded(by: .seconds(10)).value == ChangeEvent(reason: .serverChange, keys: ["greeting"]))
        #expect(app.string(forKey: "greeting") == "hello")

        // watch stops: the app takes the store over, and keeps every value.
        watch.terminate()
        _ = await watch.wait(upTo: .seconds(30))
        let tookOver = await eventually(timeout: .seconds(20)) { !app.internals.isAttached }
        #expect(tookOver)
        try app.setValue(.integer(3), forKey: "backgroundColor")
        #expect(app.synchronize())
        await app.internals.close()
        let values = try await HearthCLI.run(["list", "--json", "--store", "com.example.colors"] + device.directories)
        #expect(values.output.contains("\"backgroundColor\":3"), "\(values.output)")
        #expect(values.output.contains("\"greeting\":\"hello\""), "\(values.output)")
    }
}
