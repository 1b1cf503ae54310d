import Foundation
import HearthTestSupport
import HearthTesting
import Testing

/// `hearth daemon` as a user runs it: one per user, holding every store of the data folder,
/// reached by the other `hearth` commands, installed as a systemd user unit (issue 13).
@Suite(.serialized, .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
struct DaemonTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-daemon-\(UUID().uuidString)").path
    /// Runtime folders: short, as a socket's path must fit in 108 bytes (a deeper one falls back
    /// to /tmp/hearth-UID, shared by every test).
    let runtime = "/tmp/hrt-\(UUID().uuidString.prefix(8))"

    /// This test's own runtime folder and home, so that daemons of parallel tests never meet.
    func environment(_ name: String) throws -> [String: String] {
        try HearthCLI.environment(runtime: runtime, root: root, device: name)
    }

    func run(_ arguments: [String], _ environment: [String: String]) async throws -> (status: Int32?, output: String, error: String) {
        try await HearthCLI.run(arguments, environment: environment)
    }

    func startDaemon(_ arguments: [String], _ environment: [String: String]) async throws -> ChildProcess {
        // HEARTH_LOG_LEVEL=debug: the daemons log at that level (their output is in failures).
        let level = ProcessInfo.processInfo.environment["HEARTH_LOG_LEVEL"].map { ["--log-level", $0] } ?? []
        let daemon = try ChildProcess(try #require(HearthCLI.binary), ["daemon"] + arguments + level, environment: environment)
        let started = await daemon.waitForOutput("Ctrl-C to stop", inErrors: true, upTo: .seconds(30))
        try #require(started, "the daemon did not start: \(daemon.errorOutput)")
        return daemon
    }

    @Test("One daemon per user: a second one refuses with status 10 and names the first one's pid")
    func oneDaemonPerUser() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let environment = try environment("solo")
        let directories = ["--config-dir", "\(root)/solo/config", "--data-dir", "\(root)/solo/data"]
        let first = try await startDaemon(directories, environment)
        defer { first.terminate() }
        let second = try await run(["daemon"] + directories, environment)
        #expect(second.status == 10)
        #expect(second.error.contains("a Hearth daemon already runs for this user (pid \(first.pid)"), "\(second.error)")
        // The first goes on, and stops cleanly on SIGTERM, releasing the lock for the next.
        first.send(SIGTERM)
        #expect(await first.wait(upTo: .seconds(30)) == 0, "\(first.errorOutput)")
        let third = try await startDaemon(directories, environment)
        third.terminate()
    }

    @Test("The daemon holds every store of the data folder, answers hearth set/status for them, picks up a new store, and saves at SIGTERM")
    func holdsEveryStore() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let environment = try environment("solo")
        let directories = ["--config-dir", "\(root)/solo/config", "--data-dir", "\(root)/solo/data"]
        // Two stores written on this device before the daemon starts (signed out: local stores).
        for store in ["com.example.a", "com.example.b"] {
            let set = try await run(["set", "--store", store, "k", "1"] + directories, environment)
            try #require(set.status == 0, "\(set.error)")
        }
        let daemon = try await startDaemon(directories + ["--rescan-interval", "0.5"], environment)
        defer { daemon.terminate() }
        #expect(await daemon.waitForOutput("holding store com.example.b", inErrors: true, upTo: .seconds(20)), "\(daemon.errorOutput)")

        let status = try await run(["daemon", "status", "--json"], environment)
        #expect(status.status == 0, "\(status.error)")
        #expect(status.output.contains("\"store\":\"com.example.a\"") && status.output.contains("\"store\":\"com.example.b\""), "\(status.output)")
        #expect(status.output.contains("\"pid\":\(daemon.pid)"))

        // A write goes to the daemon holding the store (it cannot be opened here), and lands.
        let set = try await run(["set", "--store", "com.example.a", "k", "2"] + directories, environment)
        #expect(set.status == 0, "\(set.error)")
        let held = try await run(["status", "--json"] + directories, environment)
        #expect(held.output.contains("\"heldBy\":\(daemon.pid)"), "\(held.output)")

        // A new store written by a one-shot hearth set: the set asks the daemon to hold it
        // first, and hands it the write.
        let created = try await run(["set", "--store", "com.example.c", "k", "3"] + directories, environment)
        #expect(created.status == 0, "\(created.error)")
        #expect(await daemon.waitForOutput("holding store com.example.c", inErrors: true, upTo: .seconds(20)), "\(daemon.errorOutput)")
        let third = try await run(["daemon", "status"], environment)
        #expect(third.output.contains("store     com.example.c: 1 keys"), "\(third.output)")

        daemon.send(SIGTERM)
        #expect(await daemon.wait(upTo: .seconds(30)) == 0, "\(daemon.errorOutput)")
        let value = try await run(["get", "--store", "com.example.a", "k"] + directories, environment)
        #expect(value.output == "2\n", "\(value.error)")
        let gone = try await run(["daemon", "status"], environment)
        #expect(gone.status == 11)
    }

    @Test("Background: A and B run daemons and no app; a value written on A, its writer gone, is read on B at open though B never opened the store")
    func background() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let (laptop, kitchen) = try await Device.household(root: root)
        let store = "com.example.colors"
        var daemons: [ChildProcess] = []
        defer { for daemon in daemons { daemon.terminate() } }
        for device in [laptop, kitchen] {
            daemons.append(try await startDaemon(device.directories + ["--port", String(device.port), "--peer", "127.0.0.1:\(device.peerPort)"],
                                                 try environment(device.name)))
        }
        // A one-shot writer on the laptop: the store is new; the laptop's daemon holds it at the
        // writer's request and takes the write, and the writer exits without waiting.
        let written = try await run(["set", "--store", store, "k", "1", "--wait", "0"] + laptop.directories, try environment(laptop.name))
        #expect(daemons[0].errorOutput.contains("holding store \(store) (asked by an app)"), "\(daemons[0].errorOutput)")
        #expect(written.status == 0, "\(written.error)")
        // The kitchen never opened the store: its daemon takes it up when the laptop's offers it,
        // and a new process there reads the value at open.
        let read = try await kitchen.untilSaved(deadline: .seconds(10)) {
            try await run(["get", "--store", store, "k"] + kitchen.directories, try environment(kitchen.name)).output == "1\n"
        }
        #expect(read, "kitchen daemon: \(daemons[1].errorOutput)")
        #expect(daemons[1].errorOutput.contains("holding store \(store) (served by a peer)"), "\(daemons[1].errorOutput)")
    }

    @Test("Hub: C runs only the daemon and never opened S; A writes S and leaves; D joins, reaches only C, and gets S")
    func hub() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let (laptop, hub) = try await Device.household(root: root)
        let store = "com.example.notes"
        let laptopDaemon = try await startDaemon(laptop.directories + ["--port", String(laptop.port), "--peer", "127.0.0.1:\(hub.port)"],
                                                 try environment(laptop.name))
        defer { laptopDaemon.terminate() }
        let hubDaemon = try await startDaemon(hub.directories + ["--port", String(hub.port)], try environment(hub.name))
        defer { hubDaemon.terminate() }
        let written = try await run(["set", "--store", store, "shopping", "--string", "milk", "--wait", "0"] + laptop.directories,
                                    try environment(laptop.name))
        #expect(written.status == 0, "\(written.error)")
        let atHub = try await hub.untilSaved(deadline: .seconds(60)) {
            try await run(["get", "--store", store, "shopping"] + hub.directories, try environment(hub.name)).output == "\"milk\"\n"
        }
        try #require(atHub, "hub daemon: \(hubDaemon.errorOutput)\nlaptop daemon: \(laptopDaemon.errorOutput)")
        // A leaves the network for good.
        laptopDaemon.send(SIGTERM)
        #expect(await laptopDaemon.wait(upTo: .seconds(30)) == 0)
        // D joins the household and knows only the hub.
        let phone = Device(name: "phone", root: root, port: try LoopbackCluster.freePort(), peerPort: hub.port)
        let joined = try await run(["account", "join", "\(root)/home.bundle", "--passphrase", "pw", "--device", "phone"] + phone.directories,
                                   try environment(phone.name))
        try #require(joined.status == 0, "\(joined.error)")
        let phoneDaemon = try await startDaemon(phone.directories + ["--port", String(phone.port), "--peer", "127.0.0.1:\(hub.port)"],
                                                try environment(phone.name))
        defer { phoneDaemon.terminate() }
        let atPhone = try await phone.untilSaved(deadline: .seconds(60)) {
            try await run(["get", "--store", store, "shopping"] + phone.directories, try environment(phone.name)).output == "\"milk\"\n"
        }
        #expect(atPhone, "phone daemon: \(phoneDaemon.errorOutput)")
    }

    @Test("install writes a systemd user unit that runs this hearth's daemon with the given folders; where systemd is absent it says what to run; uninstall removes it")
    func installAndUninstall() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        var environment = try environment("solo")
        // No systemctl on PATH: what a machine without systemd sees.
        environment["PATH"] = "\(root)/solo/empty"
        let installed = try await run(["daemon", "install", "--data-dir", "\(root)/solo/data", "--peer", "127.0.0.1:9"], environment)
        #expect(installed.status == 0, "\(installed.error)")
        let unitPath = "\(root)/solo/home/.config/systemd/user/hearth.service"
        let unit = try String(contentsOfFile: unitPath, encoding: .utf8)
        let binary = try #require(HearthCLI.binary)
        let resolved = (try? FileManager.default.destinationOfSymbolicLink(atPath: binary)) ?? binary
        #expect(unit.contains("ExecStart=\"\(URL(fileURLWithPath: resolved).resolvingSymlinksInPath().path)\" \"daemon\" \"run\" \"--data-dir\" \"\(root)/solo/data\" \"--peer\" \"127.0.0.1:9\""), "\(unit)")
        #expect(unit.contains("WantedBy=default.target"))
        #expect(installed.output.contains("systemctl is not installed"), "\(installed.output)")
        #expect(installed.output.contains("daemon run --data-dir \(root)/solo/data --peer 127.0.0.1:9"))
        var info = stat()
        #expect(stat(unitPath, &info) == 0 && info.st_mode & 0o777 == 0o600)

        let removed = try await run(["daemon", "uninstall"], environment)
        #expect(removed.status == 0, "\(removed.error)")
        #expect(!FileManager.default.fileExists(atPath: unitPath))
        #expect(removed.output.contains("removed \(unitPath)"))
    }

    @Test("Another user cannot connect to the daemon's socket: the folder is 0700, the sockets 0600, and a client as uid 65534 is refused",
          .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root and setpriv"))
    func anotherUserIsRefused() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let environment = try environment("solo")
        // Everything above our runtime folder is open to all, so only the folder's own mode can refuse.
        for folder in [runtime, "\(runtime)/solo"] { chmod(folder, 0o755) }
        let daemon = try await startDaemon(["--data-dir", "\(root)/solo/data"], environment)
        defer { daemon.terminate() }
        let folder = "\(runtime)/solo/hearth", socket = "\(folder)/daemon.sock"
        var info = stat()
        #expect(stat(folder, &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(stat(socket, &info) == 0 && info.st_mode & 0o777 == 0o600)
        // As ourselves the socket answers; as another user the connection is refused.
        let own = try await run(["daemon", "status", "--json"], environment)
        #expect(own.status == 0, "\(own.error)")
        let probe = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(sys.argv[1]); s.sendall(b'{"op":"daemon-status"}\\n'); print("answered:", s.recv(100))
            except OSError as e:
                print("refused:", e.strerror)
            """
        let other = try await ChildProcess.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups",
                                                                    "/usr/bin/python3", "-c", probe, socket])
        #expect(other.output.hasPrefix("refused: Permission denied"), "\(other.output) \(other.error)")
        #expect(!other.output.contains("answered"))
    }

    @Test("The runtime folder must be ours and closed to others: an open one is refused")
    func runtimeFolderChecked() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let environment = try environment("solo")
        try FileManager.default.createDirectory(atPath: "\(runtime)/solo/hearth", withIntermediateDirectories: true)
        chmod("\(runtime)/solo/hearth", 0o777)
        let refused = try await run(["daemon", "--data-dir", "\(root)/solo/data"], environment)
        #expect(refused.status == 1)
        #expect(refused.error.contains("\(runtime)/solo/hearth has mode 777, not 700"), "\(refused.error)")
        #expect(refused.error.contains("chmod 700"), "\(refused.error)")
    }
}
