import Foundation
import Testing

/// A child process of a test, with its output collected in files (no pipe can fill up and
/// block it), readable while it runs.
///
/// Spawned with posix_spawn rather than Foundation's Process, with an empty signal mask and
/// default dispositions: the test runner's threads block SIGTERM and friends, Process passes
/// that mask on, and the children (our executables, avahi-publish, dbus-daemon, scripts and
/// their traps) would then ignore being told to stop.
public final class ChildProcess {
    /// Where the child's standard output and standard error go.
    public enum Output {
        /// Two new files in the temporary directory (`output` and `errorOutput`), removed
        /// with this object.
        case separateFiles
        /// Both appended to the one file at `path` (`output`), which is left in place.
        case oneFile(path: String)
    }

    public let pid: pid_t
    /// The exit code, or 128 + the signal like a shell; nil while the child has not been reaped.
    public private(set) var exitStatus: Int32?
    private let outputPath: String
    private let errorPath: String?
    private let removesFiles: Bool

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc
    /// module does not import (it sits behind _GNU_SOURCE).
    private static let addCloseFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32 = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else {
            fatalError("this C library lacks posix_spawn_file_actions_addclosefrom_np (glibc 2.34+)")
        }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    /// The signals reset to their default disposition in the child.
    private static let defaultSignals = [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD, SIGUSR1]

    /// Starts `executable` (a path) with `arguments`, stdin from /dev/null, and `environment`
    /// (nil: this process's).
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                output: Output = .separateFiles) throws {
        switch output {
        case .separateFiles:
            let base = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-test-\(UUID().uuidString)").path
            outputPath = base + ".out"
            errorPath = base + ".err"
            removesFiles = true
        case .oneFile(let path):
            outputPath = path
            errorPath = nil
            removesFiles = false
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in Self.defaultSignals { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // Nothing else of ours goes with it: NIO's sockets are not close-on-exec, and a child
        // holding another test's connection or listener keeps it open after that test closes it.
        guard Self.addCloseFrom(&actions, 3) == 0 else { throw POSIXError(.ENOSYS) }
        if let errorPath {
            posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }

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
        if removesFiles {
            unlink(outputPath)
            if let errorPath { unlink(errorPath) }
        }
    }

    /// The file standard output goes to: to wait on its writes (``untilFilesChange(_:_:deadline:sourceLocation:_:)``).
    public var outputFile: String { outputPath }

    /// Standard output so far (with `.oneFile`, standard error too).
    public var output: String { Self.read(outputPath) }
    /// Standard error so far (with `.oneFile`, the same as `output`).
    public var errorOutput: String { Self.read(errorPath ?? outputPath) }

    private static func read(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    /// Reaps the child if it has exited.
    public var isRunning: Bool {
        if exitStatus != nil { return false }
        var status: Int32 = 0
        let reaped = waitpid(pid, &status, WNOHANG)
        guard reaped == pid else { return reaped == 0 }
        exitStatus = Self.shellStatus(status)
        return false
    }

    /// Waits for exit up to `timeout` (then stops it); returns the exit status, or nil on timeout.
    /// Woken by the exit itself (a pidfd), not a poll.
    public func wait(upTo timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        if isRunning, let exit = ProcessExit(pid) { _ = await exit.wait(until: deadline) }
        guard !isRunning else {   // checked once more after the deadline: it may end just then
            terminate()
            return nil
        }
        return exitStatus
    }

    /// Waits until stdout (or stderr) contains `text`; false on timeout. Woken by each write to
    /// the output file (inotify), not a poll.
    public func waitForOutput(_ text: String, inErrors: Bool = false, upTo timeout: Duration = .seconds(10)) async -> Bool {
        let path = inErrors ? (errorPath ?? outputPath) : outputPath
        return await untilFilesChange([path], deadline: timeout) { Self.read(path).contains(text) }
    }

    /// Sends `signal` (unless the child has been reaped: its pid may belong to another process).
    public func send(_ signal: Int32) {
        guard exitStatus == nil else { return }
        Glibc.kill(pid, signal)
    }

    /// SIGKILL, then reaps (at once: nothing can delay a SIGKILL, not even SIGSTOP).
    public func kill() {
        guard isRunning else { return }
        Glibc.kill(pid, SIGKILL)
        reap()
    }

    /// SIGTERM, then SIGKILL if it has not ended two seconds later; always reaps.
    public func terminate() {
        guard isRunning else { return }
        let exit = ProcessExit(pid)
        Glibc.kill(pid, SIGTERM)
        if let exit, exit.block(until: ContinuousClock.now + .seconds(2)) {
            reap()
            return
        }
        Glibc.kill(pid, SIGKILL)
        reap()
    }

    /// Waits for the child (after a SIGKILL: briefly) and records how it ended.
    private func reap() {
        var status: Int32 = 0
        guard waitpid(pid, &status, 0) == pid else { exitStatus = 137; return }
        exitStatus = Self.shellStatus(status)
    }

    /// The exit code, or 128 + the signal like a shell.
    private static func shellStatus(_ status: Int32) -> Int32 {
        (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Runs to completion and returns (status, stdout, stderr).
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                           timeout: Duration = .seconds(30)) async throws -> (status: Int32?, output: String, error: String) {
        let child = try ChildProcess(executable, arguments, environment: environment)
        let status = await child.wait(upTo: timeout)
        return (status, child.output, child.errorOutput)
    }

    /// Runs a short command to completion from synchronous code (a defer), up to five seconds
    /// (then it is stopped with the object).
    public static func runBlocking(_ executable: String, _ arguments: [String]) {
        guard let child = try? ChildProcess(executable, arguments), let exit = ProcessExit(child.pid) else { return }
        _ = exit.block(until: ContinuousClock.now + .seconds(5))
    }

    /// An executable built next to this test binary (swift build --build-tests builds them);
    /// the test binary may sit inside a .xctest bundle directory.
    public static func builtProduct(_ name: String) -> String? {
        let me = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "")
        var directory = me.deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }
}
