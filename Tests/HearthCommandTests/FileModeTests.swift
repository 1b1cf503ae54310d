import Foundation
import Hearth
import HearthTestSupport
import HearthTesting
import Testing

/// Issue 11, point 7: every file the command writes is 0600 (and every folder 0700) whatever
/// the umask.
@Suite struct FileModeTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-modes-\(UUID().uuidString)").path

    /// `hearth ARGS` under umask 000, with its control sockets under `root`/tmp.
    func underOpenUmask(_ arguments: [String]) throws -> ChildProcess {
        var environment = HearthCLI.environment
        environment["TMPDIR"] = "\(root)/tmp"
        return try ChildProcess("/bin/sh", ["-c", "umask 000; exec \"$0\" \"$@\"", try #require(HearthCLI.binary)] + arguments,
                                environment: environment)
    }

    func run(_ arguments: [String]) async throws {
        let child = try underOpenUmask(arguments)
        #expect(await child.wait(upTo: .seconds(60)) == 0, "\(arguments): \(child.errorOutput)")
    }

    @Test("Point 7: every file hearth writes is 0600 and every folder 0700, even under umask 000",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func everyFileIsPrivate() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: "\(root)/tmp", withIntermediateDirectories: true)
        let laptop = Device(name: "laptop", root: root, port: try LoopbackCluster.freePort(), peerPort: try LoopbackCluster.freePort())
        let kitchen = Device(name: "kitchen", root: root, port: laptop.peerPort, peerPort: laptop.port)
        try await run(["account", "create", "--passphrase", "pw", "--device", "laptop"] + laptop.directories)
        try await run(["account", "export", "--output", "\(root)/home.bundle"] + laptop.directories)
        try await run(["account", "join", "\(root)/home.bundle", "--passphrase", "pw", "--device", "kitchen"] + kitchen.directories)
        try await run(["set", "color", "2", "--wait", "0"] + laptop.store + laptop.directories)
        try await run(["account", "sign-out"] + kitchen.directories)
        try await run(["set", "color", "3", "--wait", "0"] + kitchen.store + kitchen.directories)
        try await run(["account", "switch", "Home"] + kitchen.directories)

        // serve and watch, with what they create while they run (sockets, files beside the store).
        let serve = try underOpenUmask(["serve"] + laptop.store + laptop.directories)
        let watch = try underOpenUmask(["watch", "--create"] + kitchen.store + kitchen.directories)
        defer { serve.terminate(); watch.terminate() }
        #expect(await serve.waitForOutput("listening on port", inErrors: true, upTo: .seconds(30)), "\(serve.errorOutput)")
        #expect(await watch.waitForOutput("listening on port", inErrors: true, upTo: .seconds(30)), "\(watch.errorOutput)")
        try await run(["set", "note", "--string", "forwarded", "--wait", "5"] + laptop.store + laptop.directories)
        let peers = try underOpenUmask(["peers", "--json"] + laptop.store + laptop.directories)
        #expect(await peers.wait(upTo: .seconds(30)) == 0)
        #expect(peers.output.contains("\"heldBy\":\(serve.pid)"), "\(peers.output)")
        // The command put the holders' control sockets under its $TMPDIR (the library reads no TMPDIR).
        let sockets = (try? FileManager.default.contentsOfDirectory(atPath: "\(root)/tmp/hearth-\(geteuid())")) ?? []
        #expect(sockets.contains { $0.hasSuffix(".sock") }, "no control socket under TMPDIR: \(sockets)")

        var checked = 0
        for path in try FileManager.default.subpathsOfDirectory(atPath: root) {
            var info = stat()
            guard lstat("\(root)/\(path)", &info) == 0 else { continue }   // gone meanwhile (a temporary file)
            let mode = info.st_mode & 0o777
            if path == "tmp" { continue }      // made by this test
            if info.st_mode & S_IFMT == S_IFDIR {
                #expect(mode == 0o700, "\(path) is a folder of mode \(String(mode, radix: 8))")
            } else {
                #expect(mode == 0o600, "\(path) has mode \(String(mode, radix: 8))")
            }
            checked += 1
        }
        #expect(checked >= 12, "only \(checked) paths under \(root)")
    }

    @Test("Issue 26: daemon install makes ~/.config/systemd/user 0700 and the unit 0600; the daemon's runtime folder is 0700, its lock and socket 0600, even under umask 000",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func daemonFilesArePrivate() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: "\(root)/empty", withIntermediateDirectories: true)
        var environment = HearthCLI.environment
        environment["HOME"] = "\(root)/home"        // made by hearth: ~/.config and below
        environment["XDG_CONFIG_HOME"] = nil
        environment["XDG_RUNTIME_DIR"] = root       // hearth makes $XDG_RUNTIME_DIR/hearth
        environment["PATH"] = "\(root)/empty"        // no systemctl: install only writes the unit
        func underOpenUmask(_ arguments: [String]) throws -> ChildProcess {
            try ChildProcess("/bin/sh", ["-c", "umask 000; exec \"$0\" \"$@\"", try #require(HearthCLI.binary)] + arguments,
                             environment: environment)
        }
        let data = ["--config-dir", "\(root)/home/config", "--data-dir", "\(root)/home/data"]
        let install = try underOpenUmask(["daemon", "install"] + data)
        #expect(await install.wait(upTo: .seconds(60)) == 0, "\(install.errorOutput)")
        let daemon = try underOpenUmask(["daemon", "run"] + data)
        defer { daemon.terminate() }
        #expect(await daemon.waitForOutput("Ctrl-C to stop", inErrors: true, upTo: .seconds(30)), "\(daemon.errorOutput)")
        let expected: [(String, mode_t)] = [
            ("home/.config", 0o700), ("home/.config/systemd", 0o700), ("home/.config/systemd/user", 0o700),
            ("home/.config/systemd/user/hearth.service", 0o600),
            ("hearth", 0o700), ("hearth/daemon.lock", 0o600), ("hearth/daemon.sock", 0o600),
        ]
        for (path, mode) in expected {
            var info = stat()
            #expect(lstat("\(root)/\(path)", &info) == 0, "\(path) is missing")
            #expect(info.st_mode & 0o777 == mode, "\(path) has mode \(String(info.st_mode & 0o777, radix: 8))")
        }
    }
}
