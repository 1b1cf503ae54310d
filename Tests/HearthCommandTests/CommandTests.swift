import Foundation
import Hearth
import HearthTestSupport
import HearthTesting
import Testing

/// Two devices, each a config and a data directory, driven through the hearth command as a
/// person would type it. Static peers on 127.0.0.1, so it runs with or without the test network.
struct Device {
    let name: String
    let root: String
    let port: Int
    var peerPort: Int

    var config: String { "\(root)/\(name)/config" }
    var data: String { "\(root)/\(name)/data" }
    var directories: [String] { ["--config-dir", config, "--data-dir", data] }

    /// Waits until `condition` holds, checking it again each time a store file of this device
    /// is saved (inotify on its data folder), never on a timer; false if not by `deadline`.
    func untilSaved(deadline: Duration, _ condition: () async throws -> Bool) async rethrows -> Bool {
        try await untilFilesChange([data], names: { $0.hasSuffix(".plist") }, deadline: deadline, condition)
    }
    /// Store options: this device's port and the other device as its only peer.
    var store: [String] { ["--store", "com.example.colors", "--port", String(port), "--peer", "127.0.0.1:\(peerPort)"] }
}

enum HearthCLI {
    static let binary = ChildProcess.builtProduct("hearth")

    /// This process's environment without HEARTH_PEERS and friends: settings from the outside
    /// must not leak into the devices.
    ///
    /// With `HEARTH_TEST_WEAK_SCRYPT=1`: the accounts these tests create seal their CA key with
    /// scrypt N = 2^10 instead of 2^18, so that `account create` and `account join` (a derivation
    /// each) cost milliseconds, not a second and 256 MiB each, a hundred times over. The tests of
    /// the real cost (`CAKeyCommandTests`) leave it out.
    static var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for name in ["HEARTH_PEERS", "HEARTH_STORE_IDENTIFIER", "HEARTH_PASSPHRASE", "HEARTH_CONFIG_DIR", "HEARTH_DATA_DIR"] {
            environment[name] = nil
        }
        environment["HEARTH_TEST_WEAK_SCRYPT"] = "1"
        return environment
    }

    /// ``environment`` with a runtime folder (`RUNTIME/NAME`) and a home (`ROOT/NAME/home`) of
    /// the device's own, so that daemons of parallel tests never meet.
    static func environment(runtime: String, root: String, device name: String) throws -> [String: String] {
        var environment = environment
        try FileManager.default.createDirectory(atPath: "\(runtime)/\(name)", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(root)/\(name)/home", withIntermediateDirectories: true)
        environment["XDG_RUNTIME_DIR"] = "\(runtime)/\(name)"
        environment["HOME"] = "\(root)/\(name)/home"
        environment["XDG_CONFIG_HOME"] = nil
        return environment
    }

    /// Runs `hearth ARGS` to completion.
    static func run(_ arguments: [String]) async throws -> (status: Int32?, output: String, error: String) {
        try await ChildProcess.run(try #require(binary), arguments, environment: environment)
    }

    /// Runs `hearth ARGS` to completion in `environment` (a device's runtime folder, say).
    static func run(_ arguments: [String], environment: [String: String]) async throws -> (status: Int32?, output: String, error: String) {
        try await ChildProcess.run(try #require(binary), arguments, environment: environment)
    }

    /// Starts `hearth ARGS` and returns at once.
    static func start(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(try #require(binary), arguments, environment: environment)
    }
}

extension Device {
    /// Two devices of one new household ("laptop" creates it, "kitchen" joins) under `root`,
    /// on free loopback ports, each the other's only peer.
    static func household(root: String) async throws -> (laptop: Device, kitchen: Device) {
        let portA = try LoopbackCluster.freePort(), portB = try LoopbackCluster.freePort()
        let laptop = Device(name: "laptop", root: root, port: portA, peerPort: portB)
        let kitchen = Device(name: "kitchen", root: root, port: portB, peerPort: portA)
        let created = try await HearthCLI.run(["account", "create", "--passphrase", "pw", "--device", "laptop"] + laptop.directories)
        try #require(created.status == 0, "\(created.error)")
        let exported = try await HearthCLI.run(["account", "export", "--output", "\(root)/home.bundle"] + laptop.directories)
        try #require(exported.status == 0, "\(exported.error)")
        let joined = try await HearthCLI.run(["account", "join", "\(root)/home.bundle", "--passphrase", "pw", "--device", "kitchen"]
                                             + kitchen.directories)
        try #require(joined.status == 0, "\(joined.error)")
        return (laptop, kitchen)
    }

    /// One device signed in to a new household, whose only peer has nobody behind its port.
    static func alone(root: String) async throws -> Device {
        let solo = Device(name: "solo", root: root, port: try LoopbackCluster.freePort(), peerPort: try LoopbackCluster.freePort())
        let created = try await HearthCLI.run(["account", "create", "--device", "solo"] + solo.directories)
        try #require(created.status == 0, "\(created.error)")
        return solo
    }

    /// This device's ID (hex), as `hearth account show --json` says.
    func deviceID() async throws -> String {
        let shown = try await HearthCLI.run(["account", "show", "--json"] + directories).output
        return String(try #require(shown.split(separator: "\"device\":\"").dropFirst().first?.prefix(64)))
    }
}

extension HearthCLI {
    /// Starts `hearth serve` (or another long-running subcommand) for `device` and waits until it
    /// listens for peers, so that it holds the store before the caller goes on.
    static func serve(_ device: Device, _ subcommand: [String] = ["serve"], extra: [String] = []) async throws -> ChildProcess {
        let child = try start(subcommand + device.store + device.directories + extra)
        let listening = await child.waitForOutput("listening on port \(device.port)", inErrors: true, upTo: .seconds(30))
        try #require(listening, "\(subcommand) did not start: \(child.errorOutput)")
        return child
    }

}

/// Waits for peers are long (`--wait 30`): they end as soon as a peer confirms, and a loaded
/// machine running every suite at once must not turn a slow confirmation into a failure.
@Suite(.serialized) struct CommandTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-cmd-\(UUID().uuidString)").path

    @Test(.enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func twoDevicesJoinSetAndWatch() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let portA = try LoopbackCluster.freePort(), portB = try LoopbackCluster.freePort()
        let laptop = Device(name: "laptop", root: root, port: portA, peerPort: portB)
        let kitchen = Device(name: "kitchen", root: root, port: portB, peerPort: portA)
        let bundle = "\(root)/home.bundle"

        // Device 1 creates the household and exports it (checking the passphrase); device 2 joins with it.
        let created = try await HearthCLI.run(["account", "create", "--name", "Home", "--device", "laptop", "--passphrase", "correct horse", "--json"]
                                              + laptop.directories)
        #expect(created.status == 0, "\(created.error)")
        #expect(created.output.contains("\"deviceName\":\"laptop\""))
        let exported = try await HearthCLI.run(["account", "export", "--passphrase", "correct horse", "--output", bundle] + laptop.directories)
        #expect(exported.status == 0, "\(exported.error)")

        let wrong = try await HearthCLI.run(["account", "join", bundle, "--passphrase", "wrong", "--device", "kitchen"] + kitchen.directories)
        #expect(wrong.status == 3)
        #expect(wrong.error == "hearth: wrong passphrase for this join bundle\n")

        let joined = try await HearthCLI.run(["account", "join", bundle, "--passphrase", "correct horse", "--device", "kitchen"] + kitchen.directories)
        #expect(joined.status == 0, "\(joined.error)")
        #expect(joined.output.contains("joined account Home"))

        // Device 2 has no file for the store yet: reading it is an unknown store.
        let unknown = try await HearthCLI.run(["get", "backgroundColor", "--store", "com.example.colors"] + kitchen.directories)
        #expect(unknown.status == 4)
        #expect(unknown.error.hasPrefix("hearth: unknown store com.example.colors"))
        #expect(unknown.error.split(separator: "\n").count == 1)

        // Device 2 watches; device 1 sets. The first download is the initial sync, then serverChange.
        let watch = try ChildProcess(try #require(HearthCLI.binary), ["watch", "--create"] + kitchen.store + kitchen.directories)
        defer { watch.terminate() }
        #expect(await watch.waitForOutput("listening on port \(portB)", inErrors: true), "watch did not start: \(watch.errorOutput)")

        let first = try await HearthCLI.run(["set", "greeting", "--string", "hello", "--wait", "30"] + laptop.store + laptop.directories)
        #expect(first.status == 0, "\(first.error)")
        #expect(first.error.contains("confirmed by 1 peer device"))
        #expect(await watch.waitForOutput("initialSyncChange (1): greeting = \"hello\""), "watch printed: \(watch.output)")

        let second = try await HearthCLI.run(["set", "backgroundColor", "2", "--wait", "30"] + laptop.store + laptop.directories)
        #expect(second.status == 0, "\(second.error)")
        #expect(await watch.waitForOutput("serverChange (0): backgroundColor = 2"), "watch printed: \(watch.output)")

        // What watch printed is on device 2's disk: get reads it while watch holds the store.
        let got = try await HearthCLI.run(["get", "backgroundColor", "--json", "--store", "com.example.colors"] + kitchen.directories)
        #expect(got.status == 0, "\(got.error)")
        #expect(got.output == "2\n")
        let listed = try await HearthCLI.run(["list", "--json", "--store", "com.example.colors"] + kitchen.directories)
        #expect(listed.output == "{\"backgroundColor\":2,\"greeting\":\"hello\"}\n")

        // Writing on device 2 while watch holds its store: watch applies it for us.
        let forwarded = try await HearthCLI.run(["set", "note", "--string", "from the kitchen", "--wait", "0.5"] + kitchen.store + kitchen.directories)
        #expect(forwarded.status == 0, "\(forwarded.error)")
        #expect(forwarded.error.contains("applied by the hearth process that holds the store"))
        #expect(await watch.waitForOutput("set note for another hearth process", inErrors: true))
        let note = try await HearthCLI.run(["get", "note", "--store", "com.example.colors"] + kitchen.directories)
        #expect(note.output == "\"from the kitchen\"\n")

        // A removal reaches the watcher too.
        let removed = try await HearthCLI.run(["rm", "greeting", "--wait", "30"] + laptop.store + laptop.directories)
        #expect(removed.status == 0, "\(removed.error)")
        #expect(await watch.waitForOutput("serverChange (0): greeting removed"), "watch printed: \(watch.output)")

        // SIGTERM: watch saves and exits cleanly.
        kill(watch.pid, SIGTERM)
        #expect(await watch.wait(upTo: .seconds(10)) == 0, "\(watch.errorOutput)")
        #expect(watch.errorOutput.contains("saving and closing"))
    }

    /// The default discovery, as a household would use it: no --peer, the devices find each
    /// other through the test network's avahi-daemon.
    @Test(.enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"),
          .enabled(if: ProcessInfo.processInfo.environment["HEARTH_TESTNET"] == "1",
                   "needs the test network's avahi-daemon: scripts/test.sh runs it there"))
    func devicesFindEachOtherThroughAvahi() async throws {
        try await AvahiDaemonGate.sharing { try await devicesFindEachOtherThroughAvahiBody() }
    }

    private func devicesFindEachOtherThroughAvahiBody() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let laptop = Device(name: "laptop", root: root, port: 0, peerPort: 0)
        let kitchen = Device(name: "kitchen", root: root, port: 0, peerPort: 0)
        _ = try await HearthCLI.run(["account", "create", "--passphrase", "pw", "--device", "laptop"] + laptop.directories)
        _ = try await HearthCLI.run(["account", "export", "--output", "\(root)/b"] + laptop.directories)
        _ = try await HearthCLI.run(["account", "join", "\(root)/b", "--passphrase", "pw", "--device", "kitchen"] + kitchen.directories)

        let watch = try ChildProcess(try #require(HearthCLI.binary),
                                     ["watch", "--create", "--store", "com.example.avahi"] + kitchen.directories)
        defer { watch.terminate() }
        #expect(await watch.waitForOutput("peers: automatic", inErrors: true), "\(watch.errorOutput)")
        let set = try await HearthCLI.run(["set", "found", "--bool", "true", "--wait", "30", "--store", "com.example.avahi"] + laptop.directories)
        #expect(set.status == 0, "\(set.error)")
        #expect(set.error.contains("confirmed by 1 peer device"), "\(set.error)")
        #expect(await watch.waitForOutput("found = true"), "watch printed: \(watch.output)")
    }

    @Test(.enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func serveKeepsTwoDevicesConnectedAndStopsCleanly() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (laptop, kitchen) = try await Device.household(root: root)
        let portA = laptop.port, portB = kitchen.port
        let kitchenDevice = try await kitchen.deviceID()
        _ = try await HearthCLI.run(["set", "backgroundColor", "1", "--wait", "0"] + laptop.store + laptop.directories)

        let binary = try #require(HearthCLI.binary)
        // At info, serve says "connected" once the kitchen's session is admitted: the event the
        // peers query below waits for.
        let serveA = try ChildProcess(binary, ["serve", "--log-level", "info"] + laptop.store + laptop.directories)
        let serveB = try ChildProcess(binary, ["serve"] + kitchen.store + kitchen.directories)
        defer { serveA.terminate(); serveB.terminate() }
        // Until serve holds the store, peers would open it itself (and could take it first).
        #expect(await serveA.waitForOutput("listening on port \(portA)", inErrors: true), "\(serveA.errorOutput)")
        #expect(await serveB.waitForOutput("listening on port \(portB)", inErrors: true), "\(serveB.errorOutput)")

        // peers asks serve for its live state while it holds the store.
        #expect(await serveA.waitForOutput("[HearthSync] connected", inErrors: true), "\(serveA.errorOutput)")
        let peers = try await HearthCLI.run(["peers", "--json", "--store", "com.example.colors"] + laptop.directories).output
        #expect(peers.contains("\"connectedPeers\":[\"\(kitchenDevice)\"]"), "peers said: \(peers)")
        #expect(peers.contains("\"heldBy\":\(serveA.pid)"))
        let status = try await HearthCLI.run(["status", "--json"] + laptop.directories)
        #expect(status.output.contains("\"heldBy\":\(serveA.pid)"), "status said: \(status.output)")

        // SIGINT, as Ctrl-C: serve saves, says so, exits 0 and stops answering on its control socket.
        kill(serveA.pid, SIGINT)
        #expect(await serveA.wait(upTo: .seconds(10)) == 0, "\(serveA.errorOutput)")
        #expect(serveA.errorOutput.contains("serving: interrupted; saving and closing"))
        let after = try await HearthCLI.run(["status", "--json"] + laptop.directories)
        #expect(after.output.contains("\"heldBy\":null"), "status said: \(after.output)")
    }

    @Test(.enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func mistakesGetOneClearLineAndTheirStatus() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let device = Device(name: "solo", root: root, port: try LoopbackCluster.freePort(), peerPort: try LoopbackCluster.freePort())
        _ = try await HearthCLI.run(["account", "create", "--device", "solo"] + device.directories)
        let quick = ["--wait", "0", "--store", "com.example.notes"] + device.directories

        let badJSON = try await HearthCLI.run(["set", "note", "{\"title\": \"Milk\""] + quick)
        #expect(badJSON.status == 5)
        #expect(badJSON.error == "hearth: the value is not valid JSON: unterminated object at offset 16 (for plain text use --string)\n")

        let null = try await HearthCLI.run(["set", "note", "null"] + quick)
        #expect(null.status == 5)

        let longKey = String(repeating: "k", count: 65)
        let tooLong = try await HearthCLI.run(["set", longKey, "1"] + quick)
        #expect(tooLong.status == 5)
        #expect(tooLong.error.hasPrefix("hearth: key is 65 bytes of UTF-8; the limit is 64"))
        #expect(tooLong.error.split(separator: "\n").count == 1)

        let unknownStore = try await HearthCLI.run(["list", "--store", "com.example.never"] + device.directories)
        #expect(unknownStore.status == 4)

        let usage = try await HearthCLI.run(["set", "--store", "x"] + device.directories)
        #expect(usage.status == 2)
        #expect(usage.error.split(separator: "\n").count == 1)

        // Typed flags keep their types; JSON keeps integers and doubles apart.
        for (arguments, expected) in [(["a", "--int", "7"], "7"), (["b", "--double", "7"], "7.0"), (["c", "--bool", "true"], "true"),
                                      (["d", "--data-base64", "AAEC"], "{\"$data\":\"AAEC\"}"),
                                      (["e", "{\"x\": [1, 2.5, false, \"é\\n\"]}"], "{\"x\":[1,2.5,false,\"é\\n\"]}")] {
            let set = try await HearthCLI.run(["set"] + arguments + quick)
            #expect(set.status == 0, "\(set.error)")
            let got = try await HearthCLI.run(["get", arguments[0], "--json", "--store", "com.example.notes"] + device.directories)
            #expect(got.output == expected + "\n")
        }
        let missing = try await HearthCLI.run(["get", "nothing", "--store", "com.example.notes"] + device.directories)
        #expect(missing.status == 7)

        // An app (not hearth) holds the store: hearth attaches to it, and the write goes through the app.
        var sync = SyncSettings(accountDirectory: device.config, discovery: .none, listenHost: "127.0.0.1")
        sync.port = 0
        let app = try UbiquitousKeyValueStore(storeIdentifier: "com.example.notes",
                                              configuration: .init(dataDirectory: device.data, sync: sync))
        let changes = app.changes
        let throughApp = try await HearthCLI.run(["set", "a", "--int", "8"] + quick)
        #expect(throughApp.status == 0, "\(throughApp.error)")
        #expect(app.value(forKey: "a") == .integer(8))
        let firstChange = Task { () -> ChangeEvent? in
            for await change in changes { return change }
            return nil
        }
        #expect(await firstChange.bounded(by: .seconds(5)).value == ChangeEvent(reason: .serverChange, keys: ["a"]))
        let gotThroughApp = try await HearthCLI.run(["get", "a", "--json", "--store", "com.example.notes"] + device.directories)
        #expect(gotThroughApp.output == "8\n")
        await app.internals.close()

        let status = try await HearthCLI.run(["status", "--json"] + device.directories)
        #expect(status.status == 0)
        #expect(status.output.contains("\"store\":\"com.example.notes\""))

        let help = try await HearthCLI.run(["--help"])
        #expect(help.status == 0)
        #expect(help.output.contains("EXIT STATUS"))
        #expect(help.output.contains("6  the store is open in another process that takes no writes"))

        _ = try await HearthCLI.run(["account", "sign-out"] + device.directories)
        let signedOut = try await HearthCLI.run(["account", "export", "--passphrase", "x"] + device.directories)
        #expect(signedOut.status == 8)
    }
}
