import Foundation
import HearthTesting

/// A child process with its output collected in files (no pipe can fill up and block it).
///
/// Spawned with posix_spawn and an empty signal mask: the test runner's threads block
/// SIGTERM, and a child started by Foundation's Process would inherit that and ignore it.
final class ChildProcess {
    let pid: pid_t
    private var exitStatus: Int32?
    private let outputPath: String
    private let errorPath: String

    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-cmd-test-\(UUID().uuidString)").path
        outputPath = base + ".out"
        errorPath = base + ".err"

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)

        let environment = environment ?? ProcessInfo.processInfo.environment
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EINVAL) }
        self.pid = pid
    }

    deinit {
        terminate()
        unlink(outputPath)
        unlink(errorPath)
    }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }
    var errorOutput: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    /// Reaps the child if it has exited.
    var isRunning: Bool {
        if exitStatus != nil { return false }
        var status: Int32 = 0
        let reaped = waitpid(pid, &status, WNOHANG)
        guard reaped == pid else { return reaped == 0 }
        exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return false
    }

    /// Waits for exit up to `timeout` (then stops it); returns the exit status, or nil on timeout.
    func wait(upTo timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while isRunning {
            if ContinuousClock.now > deadline {
                terminate()
                return nil
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return exitStatus
    }

    /// Waits until stdout (or stderr) contains `text`; false on timeout.
    func waitForOutput(_ text: String, inErrors: Bool = false, upTo timeout: Duration = .seconds(10)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if (inErrors ? errorOutput : output).contains(text) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return (inErrors ? errorOutput : output).contains(text)   // the deadline may pass while we wait
    }

    /// SIGTERM, then SIGKILL after two seconds; always reaps.
    func terminate() {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        for _ in 0..<200 {
            if !isRunning { return }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        exitStatus = 137
    }

    /// Runs to completion and returns (status, stdout, stderr).
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                    timeout: Duration = .seconds(30)) async throws -> (status: Int32?, output: String, error: String) {
        let child = try ChildProcess(executable, arguments, environment: environment)
        let status = await child.wait(upTo: timeout)
        return (status, child.output, child.errorOutput)
    }

    /// Runs a short command to completion from synchronous code (a defer), up to five seconds.
    static func runBlocking(_ executable: String, _ arguments: [String]) {
        guard let child = try? ChildProcess(executable, arguments) else { return }
        for _ in 0..<500 where child.isRunning { usleep(10_000) }
    }

    /// An executable built next to this test binary (swift build --build-tests builds them).
    static func builtProduct(_ name: String) -> String? {
        let me = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "")
        var directory = me.deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    /// A free port on 127.0.0.1 outside the ephemeral range (see `LoopbackCluster.freePort()`).
    static func freePort() -> Int {
        // Only fails when 200 random ports in 20000..<32000 are all taken.
        try! LoopbackCluster.freePort()
    }
}
