import Foundation
import HearthCore

/// A `hearth-sync-peer` child process (Tests/HearthSyncPeer) with its output in a file.
///
/// Spawned with posix_spawn and an empty signal mask: the test runner blocks SIGTERM in its
/// threads, Foundation's Process would pass that on, and the child would ignore it.
final class PeerProcess {
    let name: String
    let data: String
    let pid: pid_t
    private let outputPath: String
    private var reaped = false

    static var executable: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("hearth-sync-peer").path
    }

    init(name: String, data: String, arguments: [String]) throws {
        self.name = name
        self.data = data
        outputPath = "\(data).\(UUID().uuidString).out"
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGUSR1, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([Self.executable, "--data", data, "--name", name] + arguments).map { strdup($0) } + [nil]
        let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, Self.executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EINVAL) }
        self.pid = pid
    }

    deinit { kill(.kill) }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// The highest N of the "confirmed N" lines so far.
    var confirmed: Int64 {
        output.split(separator: "\n").compactMap { $0.hasPrefix("confirmed ") ? Int64($0.dropFirst(10)) : nil }.max() ?? 0
    }

    /// The values of the peer's last snapshot.
    var snapshot: [String: PropertyListValue] {
        guard let bytes = FileManager.default.contents(atPath: "\(data)/snapshot.bplist"),
              let value = try? BinaryPropertyList.decode(bytes), let values = value.dictionaryValue else { return [:] }
        return values
    }

    enum Stop { case kill, term }

    func kill(_ how: Stop) {
        guard !reaped else { return }
        Glibc.kill(pid, how == .kill ? SIGKILL : SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        reaped = true
    }

    func stopWriting() { Glibc.kill(pid, SIGUSR1) }
}
