import Foundation
import HearthCore
import HearthTestSupport

/// A `hearth-sync-peer` child process (Tests/HearthSyncPeer), started as a `ChildProcess`.
final class PeerProcess {
    let name: String
    let data: String
    private let child: ChildProcess

    static var executable: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("hearth-sync-peer").path
    }

    init(name: String, data: String, arguments: [String]) throws {
        self.name = name
        self.data = data
        child = try ChildProcess(Self.executable, ["--data", data, "--name", name] + arguments)
    }

    var pid: pid_t { child.pid }

    /// What it printed and logged.
    var output: String { child.output + child.errorOutput }

    /// The highest N of the "confirmed N" lines so far.
    var confirmed: Int64 {
        child.output.split(separator: "\n").compactMap { $0.hasPrefix("confirmed ") ? Int64($0.dropFirst(10)) : nil }.max() ?? 0
    }

    /// The values of the peer's last snapshot.
    var snapshot: [String: PropertyListValue] {
        guard let bytes = FileManager.default.contents(atPath: "\(data)/snapshot.bplist"),
              let value = try? BinaryPropertyList.decode(bytes), let values = value.dictionaryValue else { return [:] }
        return values
    }

    enum Stop { case kill, term }

    /// SIGKILL (a crash) or SIGTERM (a clean stop); waits until it is reaped.
    func kill(_ how: Stop) {
        switch how {
        case .term: child.terminate()
        case .kill:
            Glibc.kill(child.pid, SIGKILL)
            while child.isRunning { usleep(1_000) }
        }
    }

    func stopWriting() { Glibc.kill(child.pid, SIGUSR1) }
}
