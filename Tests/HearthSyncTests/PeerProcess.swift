import Foundation
import HearthCore
import HearthTestSupport
import Testing

/// A `hearth-sync-peer` child process (Tests/HearthSyncPeer) with its stdout and stderr in
/// one file, readable while it runs.
final class PeerProcess {
    let name: String
    let data: String
    private let child: ChildProcess

    static var executable: String { ChildProcess.builtProduct("hearth-sync-peer") ?? "hearth-sync-peer" }

    init(name: String, data: String, arguments: [String]) throws {
        self.name = name
        self.data = data
        // Made here, not by the peer, so that a wait can watch it from the start.
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        child = try ChildProcess(Self.executable, ["--data", data, "--name", name] + arguments,
                                 output: .oneFile(path: "\(data).\(UUID().uuidString).out"))
    }

    deinit { kill(.kill) }

    var pid: pid_t { child.pid }

    var output: String { child.output }

    /// The highest N of the "confirmed N" lines so far.
    var confirmed: Int64 {
        output.split(separator: "\n").compactMap { $0.hasPrefix("confirmed ") ? Int64($0.dropFirst(10)) : nil }.max() ?? 0
    }

    /// The highest N of the "acknowledged N" lines so far (a peer acknowledged write N; `--confirm`).
    var acknowledged: Int64 {
        output.split(separator: "\n").compactMap { $0.hasPrefix("acknowledged ") ? Int64($0.dropFirst(13)) : nil }.max() ?? 0
    }

    /// The values of the peer's last snapshot.
    var snapshot: [String: PropertyListValue] {
        guard let bytes = FileManager.default.contents(atPath: "\(data)/snapshot.bplist"),
              let value = try? BinaryPropertyList.decode(bytes), let values = value.dictionaryValue else { return [:] }
        return values
    }

    /// Waits until `condition` holds, checking it at each write of the peer's snapshot (every
    /// 100 ms while it runs) or of its output, never on a timer of ours; false if it does not
    /// hold by `deadline` (then, with `what`, a test issue names it).
    @discardableResult
    func until(_ what: String? = nil, deadline: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation,
               _ condition: () -> Bool) async -> Bool {
        await untilFilesChange([data, child.outputFile], what, deadline: deadline, sourceLocation: sourceLocation, condition)
    }

    enum Stop { case kill, term }

    /// Stops the peer and reaps it: SIGKILL, or SIGTERM (then SIGKILL after two seconds).
    func kill(_ how: Stop) {
        switch how {
        case .kill: child.kill()
        case .term: child.terminate()
        }
    }

    func stopWriting() { child.send(SIGUSR1) }
}
