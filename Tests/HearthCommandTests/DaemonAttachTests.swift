import Foundation
import HearthTestSupport
import HearthTesting
import Testing

/// Apps and the daemon on one device (issue 13 points 3 and 5): an app opening a store with the
/// library's default (`.automatic`) attaches to the daemon that holds it, and goes on when the
/// daemon is killed.
@Suite(.serialized, .enabled(if: HearthCLI.binary != nil && ChildProcess.builtProduct("hearth-test-writer") != nil,
                             "hearth and hearth-test-writer are not built next to the tests"))
struct DaemonAttachTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-daemon-app-\(UUID().uuidString)").path
    /// Runtime folders: short, as sockets' paths must fit in 108 bytes (as /run/user/UID does).
    let runtime = "/tmp/hrt-\(UUID().uuidString.prefix(8))"

    /// A device whose account folder is where the library looks by default
    /// (`$XDG_CONFIG_HOME/hearth`), so that an app process finds the account as the daemon does.
    struct Host {
        let name: String
        let root: String
        let runtime: String
        let port: Int
        var config: String { "\(root)/\(name)/xdg/hearth" }
        var data: String { "\(root)/\(name)/data" }
        var directories: [String] { ["--config-dir", config, "--data-dir", data] }

        /// Waits until `condition` holds, checking it again each time a store file of this host
        /// is saved (inotify on its data folder), never on a timer; false if not by `deadline`.
        func untilSaved(deadline: Duration, _ condition: () async throws -> Bool) async rethrows -> Bool {
            try await untilFilesChange([data], names: { $0.hasSuffix(".plist") }, deadline: deadline, condition)
        }
        func environment(peers: [Host]) -> [String: String] {
            var environment = HearthCLI.environment
            environment["XDG_CONFIG_HOME"] = "\(root)/\(name)/xdg"
            environment["XDG_RUNTIME_DIR"] = "\(runtime)/\(name)"
            environment["HEARTH_PEERS"] = peers.map { "127.0.0.1:\($0.port)" }.joined(separator: ",")
            return environment
        }
    }

    func household() async throws -> (Host, Host) {
        let laptop = Host(name: "laptop", root: root, runtime: runtime, port: try LoopbackCluster.freePort())
        let kitchen = Host(name: "kitchen", root: root, runtime: runtime, port: try LoopbackCluster.freePort())
        for host in [laptop, kitchen] {
            try FileManager.default.createDirectory(atPath: "\(runtime)/\(host.name)", withIntermediateDirectories: true)
        }
        let created = try await HearthCLI.run(["account", "create", "--passphrase", "a household passphrase of some length",
                                               "--device", "laptop"] + laptop.directories)
        try #require(created.status == 0, "\(created.error)")
        let exported = try await HearthCLI.run(["account", "export", "--output", "\(root)/home.bundle"] + laptop.directories)
        try #require(exported.status == 0, "\(exported.error)")
        let joined = try await HearthCLI.run(["account", "join", "\(root)/home.bundle", "--passphrase", "a household passphrase of some length",
                                              "--device", "kitchen"] + kitchen.directories)
        try #require(joined.status == 0, "\(joined.error)")
        return (laptop, kitchen)
    }

    func startDaemon(_ host: Host, peer: Host) async throws -> ChildProcess {
        let daemon = try ChildProcess(try #require(HearthCLI.binary),
                                      ["daemon", "--port", String(host.port), "--peer", "127.0.0.1:\(peer.port)", "--rescan-interval", "1"] + host.directories,
                                      environment: host.environment(peers: [peer]))
        let started = await daemon.waitForOutput("Ctrl-C to stop", inErrors: true, upTo: .seconds(30))
        try #require(started, "the daemon did not start: \(daemon.errorOutput)")
        return daemon
    }

    /// Keys `name-1`… that the kitchen holds, by its `hearth status`.
    func keys(on host: Host, store: String) async throws -> Int {
        let listed = try await HearthCLI.run(["list", "--store", store, "--json"] + host.directories)
        return listed.output.components(separatedBy: "\"app-").count - 1
    }

    @Test("Point 3: an app attaches to the daemon holding its store; the daemon's and the app's writes meet, and reach a peer")
    func appAttachesToDaemon() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let (laptop, kitchen) = try await household()
        let store = "com.example.shared"
        let daemonA = try await startDaemon(laptop, peer: kitchen)
        defer { daemonA.terminate() }
        let daemonB = try await startDaemon(kitchen, peer: laptop)
        defer { daemonB.terminate() }
        let writer = try #require(ChildProcess.builtProduct("hearth-test-writer"))
        let app = try ChildProcess(writer, ["count", laptop.data, store, "app", "30", "10"], environment: laptop.environment(peers: [kitchen]))
        defer { app.terminate() }
        #expect(await app.waitForOutput("opened attached", upTo: .seconds(30)), "\(app.output) \(app.errorOutput)")
        #expect(daemonA.errorOutput.contains("holding store \(store) (asked by an app)"), "\(daemonA.errorOutput)")
        let done = await app.waitForOutput("done 30 true", upTo: .seconds(60))
        #expect(done, "\(app.output) \(app.errorOutput)")
        let arrived = try await kitchen.untilSaved(deadline: .seconds(30)) { try await keys(on: kitchen, store: store) == 30 }
        let held = try await keys(on: kitchen, store: store)
        #expect(arrived, "kitchen has \(held) of 30")
    }

    @Test("An account switch while an app is attached to the daemon: the app gets accountChange with the other account's values, and follows it back")
    func accountSwitchWhileAttached() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let (laptop, kitchen) = try await household()
        let store = "com.example.switch"
        let daemon = try await startDaemon(laptop, peer: kitchen)
        defer { daemon.terminate() }
        let environment = laptop.environment(peers: [kitchen])
        let set = try await HearthCLI.run(["set", "--store", store, "color", "--string", "blue"] + laptop.directories, environment: environment)
        try #require(set.status == 0, "\(set.error)")
        let shown = try await HearthCLI.run(["account", "show", "--json"] + laptop.directories, environment: environment)
        let home = try #require(shown.output.firstMatch(of: /"account":"([0-9a-f]+)"/)?.1).prefix(8)

        let writer = try #require(ChildProcess.builtProduct("hearth-test-writer"))
        let app = try ChildProcess(writer, ["watch", laptop.data, store, "color"], environment: environment)
        defer { app.terminate() }
        #expect(await app.waitForOutput("opened attached color=blue", upTo: .seconds(30)), "\(app.output) \(app.errorOutput)")

        // A second account on this device: creating it signs in to it; the daemon follows, and
        // so does the attached app, which sees that account's (empty) store.
        let created = try await HearthCLI.run(["account", "create", "--name", "Cabin", "--device", "laptop"] + laptop.directories, environment: environment)
        try #require(created.status == 0, "\(created.error)")
        #expect(await app.waitForOutput("notify 3 color color=absent", upTo: .seconds(20)),
                "no accountChange: \(app.output) \(app.errorOutput); daemon: \(daemon.errorOutput)")
        // A write under the new account reaches the app as an ordinary change.
        let cabin = try await HearthCLI.run(["set", "--store", store, "color", "--string", "green"] + laptop.directories, environment: environment)
        try #require(cabin.status == 0, "\(cabin.error)")
        #expect(await app.waitForOutput("notify 0 color color=green", upTo: .seconds(20)), "\(app.output) \(app.errorOutput)")

        // Back to the first account: its value again, as an account change.
        let back = try await HearthCLI.run(["account", "switch", String(home)] + laptop.directories, environment: environment)
        try #require(back.status == 0, "\(back.error)")
        #expect(await app.waitForOutput("notify 3 color color=blue", upTo: .seconds(20)),
                "no accountChange back: \(app.output) \(app.errorOutput); daemon: \(daemon.errorOutput)")
        #expect(!app.output.contains("opened host") && !app.output.contains("error"), "\(app.output)")
        let file = try await HearthCLI.run(["get", "--store", store, "color"] + laptop.directories, environment: environment)
        #expect(file.output.contains("blue"), "\(file.output) \(file.error)")
    }

    /// Once the app has written 50, kills the laptop's daemon (SIGKILL), checks that the app goes
    /// on to 100, and starts the daemon again.
    func killDaemonDuringWrites(_ daemon: inout ChildProcess, app: ChildProcess, laptop: Host, kitchen: Host) async throws {
        #expect(await app.waitForOutput("opened attached", upTo: .seconds(30)), "\(app.output) \(app.errorOutput)")
        #expect(await app.waitForOutput("wrote 50", upTo: .seconds(30)))
        daemon.kill()
        _ = await daemon.wait(upTo: .seconds(10))
        #expect(await app.waitForOutput("wrote 100", upTo: .seconds(30)), "the app stopped: \(app.output) \(app.errorOutput)")
        daemon = try await startDaemon(laptop, peer: kitchen)
    }

    @Test("Point 5: the daemon killed with SIGKILL during an app's write loop and restarted: every write arrives at a peer; the app goes on")
    func daemonKilledDuringWrites() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let (laptop, kitchen) = try await household()
        let store = "com.example.loop"
        var daemonA = try await startDaemon(laptop, peer: kitchen)
        let daemonB = try await startDaemon(kitchen, peer: laptop)
        defer { daemonA.terminate(); daemonB.terminate() }
        let writer = try #require(ChildProcess.builtProduct("hearth-test-writer"))
        let count = 200
        let app = try ChildProcess(writer, ["count", laptop.data, store, "app", String(count), "15"], environment: laptop.environment(peers: [kitchen]))
        defer { app.terminate() }
        try await killDaemonDuringWrites(&daemonA, app: app, laptop: laptop, kitchen: kitchen)
        let done = await app.waitForOutput("done \(count) true", upTo: .seconds(90))
        #expect(done, "\(app.output) \(app.errorOutput)")
        let status = await app.wait(upTo: .seconds(10))
        #expect(status == 0)
        let arrived = try await kitchen.untilSaved(deadline: .seconds(60)) { try await keys(on: kitchen, store: store) == count }
        let held = try await keys(on: kitchen, store: store)
        #expect(arrived, "kitchen has \(held) of \(count); laptop daemon: \(daemonA.errorOutput)")
    }

    @Test("attach = .required: without a daemon the open fails with daemonUnavailable; with one the app attaches, stays attached through a daemon SIGKILL and restart (never hosting), and every write arrives")
    func requiredMode() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let (laptop, kitchen) = try await household()
        let store = "com.example.required"
        let writer = try #require(ChildProcess.builtProduct("hearth-test-writer"))
        var environment = laptop.environment(peers: [kitchen])
        environment["HEARTH_TEST_ATTACH"] = "required"
        let refused = try await ChildProcess.run(writer, ["get", laptop.data, store, "k"], environment: environment)
        #expect(refused.status == 1)
        #expect(refused.output.contains("error daemonUnavailable"), "\(refused.output)")
        #expect(!FileManager.default.fileExists(atPath: laptop.data), "a .required open created files of its own")

        var daemonA = try await startDaemon(laptop, peer: kitchen)
        let daemonB = try await startDaemon(kitchen, peer: laptop)
        defer { daemonA.terminate(); daemonB.terminate() }
        let count = 300
        let app = try ChildProcess(writer, ["count", laptop.data, store, "app", String(count), "15"], environment: environment)
        defer { app.terminate() }
        try await killDaemonDuringWrites(&daemonA, app: app, laptop: laptop, kitchen: kitchen)
        #expect(await app.waitForOutput("done \(count) true", upTo: .seconds(90)), "\(app.output) \(app.errorOutput)")
        #expect(await app.waitForOutput("still attached", upTo: .seconds(10)), "the app took the store over: \(app.output) \(app.errorOutput)")
        #expect(await app.wait(upTo: .seconds(10)) == 0)
        let arrived = try await kitchen.untilSaved(deadline: .seconds(60)) { try await keys(on: kitchen, store: store) == count }
        let held = try await keys(on: kitchen, store: store)
        #expect(arrived, "kitchen has \(held) of \(count); laptop daemon: \(daemonA.errorOutput)")
    }
}
