import Foundation
import HearthDiscovery
import Logging
import Synchronization
import Testing

/// Where the discovery tests run and what they may use.
enum TestNet {
    /// Set by scripts/testnet/run.sh: a private avahi-daemon is reachable.
    static let isEnabled = ProcessInfo.processInfo.environment["HEARTH_TESTNET"] == "1"
    static let isRoot = getuid() == 0
    static let skipReason: Comment =
        "needs the test network: scripts/testnet/up.sh && scripts/testnet/run.sh swift test --skip-build"

    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func script(_ name: String) -> String {
        repositoryRoot.appendingPathComponent("scripts/testnet/\(name)").path
    }

    /// The probe built next to this test binary (swift build --build-tests builds it too).
    static var probePath: String? {
        let me = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "")
        var directory = me.deletingLastPathComponent()
        // The test binary may sit inside a .xctest bundle directory.
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("hearth-discovery-probe").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }
}

/// Random hashes, so concurrent tests (and leftovers) on the shared daemon never mix.
func randomHash() -> String {
    String(format: "%016llx", UInt64.random(in: 1...UInt64.max))
}

/// A service of a fresh account and store unless given.
func makeService(_ name: String, port: UInt16, account: String = randomHash(), store: String = randomHash(),
                 device: String = randomHash()) -> ServiceDescription {
    ServiceDescription(instanceName: name, port: port, protocolVersion: 1,
                       accountHash: account, storeHash: store, deviceHash: device)
}

/// Collects log lines for assertions ("ignored with a log line").
final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])

    var messages: [String] { lines.withLock { $0 } }

    func append(_ line: String) { lines.withLock { $0.append(line) } }

    func contains(_ fragment: String) -> Bool { messages.contains { $0.contains(fragment) } }

    func logger(_ label: String = "test") -> Logger {
        var logger = Logger(label: label) { _ in Handler(capture: self) }
        logger.logLevel = .debug
        return logger
    }

    struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            capture.append("\(event.level) \(event.message)")
        }
    }
}

/// Follows a discovery's events in the background so tests can wait for conditions.
final class EventRecorder: Sendable {
    private final class Storage: Sendable {
        let events = Mutex<[PeerEvent]>([])
    }

    private let storage = Storage()
    private let task: Task<Void, Never>

    init(_ discovery: any PeerDiscovery) {
        let stream = discovery.events()
        task = Task { [storage] in
            for await event in stream { storage.events.withLock { $0.append(event) } }
        }
    }

    deinit { task.cancel() }

    var all: [PeerEvent] { storage.events.withLock { $0 } }

    /// Waits until `condition` holds over the events so far; returns how long it took, or nil.
    @discardableResult
    func wait(upTo timeout: Duration = .seconds(5), until condition: ([PeerEvent]) -> Bool) async -> Duration? {
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now - start < timeout {
            if condition(all) { return clock.now - start }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition(all) ? clock.now - start : nil
    }

    /// The current peers implied by the events (by id).
    var present: [String: DiscoveredPeer] {
        var peers: [String: DiscoveredPeer] = [:]
        for event in all {
            switch event {
            case .appeared(let peer), .updated(let peer): peers[peer.id] = peer
            case .gone(let peer): peers[peer.id] = nil
            }
        }
        return peers
    }

    func peer(named name: String) -> DiscoveredPeer? { present.values.first { $0.name == name } }

    func saw(named name: String) -> Bool { all.contains { $0.peer.name == name } }
}

/// Waits until `condition` is true, polling; false on timeout.
func eventually(upTo timeout: Duration = .seconds(5), _ condition: () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let start = clock.now
    while clock.now - start < timeout {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

/// A child process whose output is collected to files (no pipe can fill up and block it).
///
/// Spawned with posix_spawn rather than Foundation's Process: the test runner's threads block
/// SIGTERM and friends, Process passes that mask on, and the children (avahi-publish,
/// dbus-daemon, our scripts and their traps) would then ignore being told to stop.
final class ChildProcess {
    let pid: pid_t
    private var exitStatus: Int32?
    private let outputPath: String
    private let errorPath: String

    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-test-\(UUID().uuidString)").path
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
        // Exit code, or 128 + signal like a shell.
        exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return false
    }

    /// Waits for exit up to `timeout` (then stops it); returns the exit status or nil.
    func wait(upTo timeout: Duration) async -> Int32? {
        if await eventually(upTo: timeout, { !isRunning }) { return exitStatus }
        terminate()
        return nil
    }

    /// SIGTERM, then SIGKILL if it is still there after two seconds; always reaps.
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
}
