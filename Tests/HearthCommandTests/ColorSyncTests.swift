import Foundation
import HearthTestSupport
import HearthTesting
import Testing

/// Two ColorSync instances (two devices of one household) in tmux, driven with send-keys and
/// read with capture-pane, as a person at two terminals would use them.
@Suite(.serialized) struct ColorSyncTests {
    static let tmuxPath = ["/usr/bin/tmux", "/usr/local/bin/tmux"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let app = ChildProcess.builtProduct("hearth-color-sync")

    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-colorsync-\(UUID().uuidString)").path
    let socket = "hearth-test-\(UUID().uuidString.prefix(8))"

    func tmux(_ arguments: String...) async throws -> String {
        let result = try await ChildProcess.run(try #require(Self.tmuxPath), ["-L", socket, "-f", "/dev/null"] + arguments)
        return result.output
    }

    /// The session's screen; when tmux cannot show it (the window's program ended and took
    /// the session with it), what tmux said instead, so that a failure names its cause.
    func screen(_ session: String) async throws -> String {
        let result = try await ChildProcess.run(try #require(Self.tmuxPath), ["-L", socket, "-f", "/dev/null", "capture-pane", "-p", "-t", session])
        return result.status == 0 ? result.output : "(no screen: tmux capture-pane exited \(result.status.map(String.init) ?? "by timeout"): \(result.error))"
    }

    /// Where the session's output is copied as the program writes it (tmux pipe-pane): each
    /// redraw is an event on this file.
    func drawings(_ session: String) -> String { "\(root)/\(session).drawn" }

    /// Waits until the session's screen contains `text`, looking again each time the program
    /// draws (inotify on ``drawings(_:)``), not on a timer; returns the last screen seen.
    func waitForScreen(_ session: String, showing text: String, timeout: Duration = .seconds(15)) async throws -> String {
        var last = ""
        let shown = try await untilFilesChange([drawings(session)], deadline: timeout) {
            last = try await screen(session)
            return last.contains(text)
        }
        if !shown { Issue.record("\(session) never showed \(String(reflecting: text)); screen:\n\(last)") }
        return last
    }

    /// Whether this process may open a pseudo-terminal, which tmux needs for each window. In
    /// some containers only root may (devpts with ptmxmode=000); scripts/test.sh then runs
    /// this suite as root.
    static let canOpenPseudoTerminal: Bool = {
        let fd = open("/dev/ptmx", O_RDWR | O_NOCTTY)  // posix_openpt, which Glibc does not export to Swift
        guard fd >= 0 else { return false }
        close(fd)
        return true
    }()

    @Test(.enabled(if: tmuxPath != nil, "tmux is not installed (scripts/setup.sh installs it)"),
          .enabled(if: canOpenPseudoTerminal, "this user cannot open a pseudo-terminal for tmux (scripts/test.sh runs this test as root then)"),
          .enabled(if: app != nil && HearthCLI.binary != nil, "hearth-color-sync or hearth is not built next to the tests"))
    func pressingTwoInOneTurnsTheOtherGreen() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (laptop, kitchen) = try await Device.household(root: root)

        let app = try #require(Self.app)
        for (session, device) in [("laptop", laptop), ("kitchen", kitchen)] {
            // Each instance gets its own HOME, so their UserDefaults files stay apart too. The
            // command goes as separate arguments, which tmux executes directly: given one
            // string it would run it with the user's shell ($SHELL, else the passwd entry's),
            // and for a system user such as scripts/user.sh's that is /usr/sbin/nologin, which
            // ends the window at once (how this test failed in CI, where SHELL is unset).
            let command = ["env", "HOME=\(root)/\(device.name)", "XDG_CONFIG_HOME=\(root)/\(device.name)/xdg", app,
                           "--config-dir", device.config, "--data-dir", device.data,
                           "--port", "\(device.port)", "--peer", "127.0.0.1:\(device.peerPort)"]
            let started = try await ChildProcess.run(try #require(Self.tmuxPath),
                                                     ["-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", session, "-x", "80", "-y", "12"] + command)
            try #require(started.status == 0, "tmux could not start the \(session) window: \(started.error)")
            // tmux runs this with /bin/sh, not the user's shell.
            _ = try await tmux("pipe-pane", "-t", session, "-o", "cat >> '\(drawings(session))'")
        }
        // The private server, whose end says both sessions have ended.
        let server = try await tmux("display-message", "-p", "#{pid}").trimmingCharacters(in: .whitespacesAndNewlines)
        let serverExit = try #require(Int32(server).flatMap(ProcessExit.init), "tmux's server pid: \(server)")
        // Whatever happens, the private tmux server goes away with the test.
        defer { ChildProcess.runBlocking(Self.tmuxPath!, ["-L", socket, "kill-server"]) }

        _ = try await waitForScreen("laptop", showing: "1 peer connected")
        _ = try await waitForScreen("kitchen", showing: "1 peer connected")

        _ = try await tmux("send-keys", "-t", "laptop", "2")
        #expect(try await waitForScreen("laptop", showing: "you picked 2 (green)").contains("colour: 2 green"))
        let kitchenScreen = try await waitForScreen("kitchen", showing: "colour: 2 green")
        #expect(kitchenScreen.contains("another device set 2"))

        // And back the other way, now a plain serverChange.
        _ = try await tmux("send-keys", "-t", "kitchen", "3")
        let laptopScreen = try await waitForScreen("laptop", showing: "colour: 3 blue")
        #expect(laptopScreen.contains("serverChange (0): another device set 3"))

        _ = try await tmux("send-keys", "-t", "laptop", "q")
        _ = try await tmux("send-keys", "-t", "kitchen", "q")
        // q quits and closes the store: both sessions end on their own, and the server with them.
        _ = await serverExit.wait(until: ContinuousClock.now + .seconds(10))
        #expect(try await tmux("list-sessions").isEmpty)

        // The colour is on each device's disk, readable by the command.
        let got = try await HearthCLI.run(["get", "backgroundColor", "--json", "--store", "com.example.colorsync"] + kitchen.directories)
        #expect(got.output == "3\n")
    }
}
