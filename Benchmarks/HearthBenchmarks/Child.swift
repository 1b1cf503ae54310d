import Foundation
import Synchronization

/// A child process of this same executable in one of its helper modes, spoken to in lines
/// over its stdin and stdout. Spawned with posix_spawn and a clean signal mask (the parent's
/// threads may block signals the child must receive).
final class Child: Sendable {
    let name: String
    let pid: pid_t
    private let input: LineWriter
    private let output: LineReader
    private let inputFD: Int32
    private let outputFD: Int32
    private let exited = Mutex(false)

    /// Every child alive, so a failing run still ends them all.
    static let live = Mutex<[pid_t: String]>([:])

    /// `executable` is this benchmark binary unless given (the daemon section runs `hearth`).
    init(name: String, arguments childArguments: [String], environment: [String: String] = [:],
         executable program: String? = nil) throws {
        self.name = name
        var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { throw BenchError("pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        for fd in [toChild[0], toChild[1], fromChild[0], fromChild[1]] { posix_spawn_file_actions_addclose(&actions, fd) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t(), all = sigset_t()
        sigemptyset(&empty)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var executable = program ?? (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        var arguments = [executable] + childArguments
        // Profiling (docs/benchmarks.md): children whose name contains one of the words in
        // HEARTH_BENCH_PROFILE run under `perf record`, one perf.data file each.
        if let words = env["HEARTH_BENCH_PROFILE"], words.split(separator: ",").contains(where: { name.contains($0) }) {
            let directory = env["HEARTH_BENCH_PROFILE_DIR"] ?? "."
            let file = "\(directory)/perf-\(name.replacingOccurrences(of: " ", with: "-"))-\(getpid()).data"
            if env["HEARTH_BENCH_PROFILER"] == "callgrind" {
                arguments = ["valgrind", "--tool=callgrind", "--callgrind-out-file=\(file).callgrind"] + arguments
                executable = "/usr/bin/valgrind"
            } else {
                // dwarf: libcrypto's assembly has no frame pointers, so -g alone loses the callers.
                arguments = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "1999", "--call-graph", "dwarf,16384", "-o", file, "--"] + arguments
                executable = "/usr/bin/perf"
            }
        }
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        close(toChild[0])
        close(fromChild[1])
        guard rc == 0 else {
            close(toChild[1]); close(fromChild[0])
            throw BenchError("posix_spawn \(name): \(String(cString: strerror(rc)))")
        }
        // The parent's ends must not leak into later children (they would hold pipes open).
        _ = fcntl(toChild[1], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fromChild[0], F_SETFD, FD_CLOEXEC)
        self.pid = pid
        inputFD = toChild[1]
        outputFD = fromChild[0]
        input = LineWriter(fd: toChild[1])
        output = LineReader(fd: fromChild[0])
        Self.live.withLock { $0[pid] = name }
    }

    func send(_ line: String) { input.send(line) }

    func readLine(timeout: Double = 30) throws -> String {
        try output.readLine(timeout: timeout, who: name)
    }

    /// Sends a command (none if empty) and returns the reply line's fields after `prefix`,
    /// which the line must start with.
    @discardableResult
    func ask(_ command: String, expect prefix: String, timeout: Double = 30) throws -> [Substring] {
        if !command.isEmpty { send(command) }
        let line = try readLine(timeout: timeout)
        let fields = line.split(separator: " ")
        guard fields.first.map(String.init) == prefix else {
            throw BenchError("\(name): asked \(command), expected \(prefix), got \(line)")
        }
        return Array(fields.dropFirst())
    }

    /// Asks the child to quit and waits for it; kills it if it does not go within `timeout`.
    func quit(timeout: Double = 15) {
        send("quit")
        let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
        var status: Int32 = 0
        while monotonicNanoseconds() < deadline {
            if waitpid(pid, &status, WNOHANG) == pid { finish(); return }
            usleep(10_000)
        }
        kill()
    }

    /// SIGKILL by pid, then reap.
    func kill() {
        guard !exited.withLock({ $0 }) else { return }
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        finish()
    }

    private func finish() {
        exited.withLock { $0 = true }
        Self.live.withLock { _ = $0.removeValue(forKey: pid) }
        close(inputFD)
        close(outputFD)
    }

    /// Kills every child still alive (after a failure).
    static func killAll() {
        let pids = live.withLock { table in defer { table = [:] }; return Array(table.keys) }
        for pid in pids {
            Glibc.kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
    }
}
