import Foundation
import HearthTestSupport
import Testing

/// `inotifywait -m -r` on a folder, for the idle tests: what was created, written, renamed or
/// removed under it, from the moment the disk went quiet.
///
/// Settling is not idling: a store saves within its write-behind delay (100 ms for the
/// command) of the last change it took in, and `hearth status` reports a change as soon as it
/// is in memory. So the watch first waits for a quiet spell, and only what comes after it is
/// the idle period's.
final class DiskWatch {
    static let inotifywait = ["/usr/bin/inotifywait", "/usr/local/bin/inotifywait"].first { FileManager.default.isExecutableFile(atPath: $0) }

    let events: String
    private let watcher: ChildProcess
    /// The size of the events file when the idle period began.
    private var start = 0
    /// What was written before the quiet spell (reported, not counted).
    private(set) var settling = ""

    init(_ root: String) throws {
        events = "\(root).events"
        watcher = try ChildProcess(try #require(Self.inotifywait),
                                   ["-m", "-r", "-e", "modify,attrib,close_write,create,delete,moved_to,moved_from",
                                    "--format", "%w%f %e", "-o", events, root])
    }

    deinit {
        watcher.terminate()
        unlink(events)
    }

    /// Waits until the watches are up and nothing has changed on disk for `quiet`; records an
    /// issue if the disk never goes quiet within `timeout`.
    func waitUntilQuiet(for quiet: Duration = .seconds(2), upTo timeout: Duration = .seconds(30)) async throws {
        #expect(await watcher.waitForOutput("Watches established", inErrors: true, upTo: .seconds(30)), "\(watcher.errorOutput)")
        // Quiet: the watcher's log of disk events not written to for `quiet` (inotify on it).
        if !(await untilQuiet([events], for: quiet, deadline: timeout)) {
            Issue.record("the disk never went quiet for \(quiet) within \(timeout):\n\(Self.text(of: events))")
        }
        start = Self.size(of: events)
        settling = String(Self.text(of: events).utf8.prefix(start)) ?? ""
    }

    /// Stops watching; returns what changed since ``waitUntilQuiet(for:upTo:)`` returned.
    func stop() -> String {
        watcher.terminate()
        return String(Self.text(of: events).utf8.dropFirst(start)) ?? ""
    }

    private static func size(of path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    private static func text(of path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }
}
