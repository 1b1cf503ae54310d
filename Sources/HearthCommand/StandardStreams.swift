import Foundation
import HearthCore
import HearthDaemon

/// Standard output and standard error, written with write(2).
///
/// SIGPIPE is ignored (``HearthCommand/main()``), so a reader that went away
/// (`hearth watch | head -n 1`) shows up as EPIPE rather than killing the process. The stream
/// is then marked closed and nothing more is written to it; the handlers registered with
/// ``whenClosed(_:)`` run once (`watch` and `serve` stop as on SIGTERM). One-shot commands
/// simply go on and exit with their usual status. Foundation's `FileHandle.write` would
/// instead trap on EPIPE (a `try!` inside it).
enum StandardStreams {
    private struct State: Sendable {
        var closed: Set<Int32> = []
        var handlers: [@Sendable () -> Void] = []
    }

    private static let state = Locked(State())

    /// Writes all of `bytes` to `fd` (1 or 2); false if the reader has gone (EPIPE), now or before.
    @discardableResult
    static func write(_ bytes: some DataProtocol, to fd: Int32) -> Bool {
        if isClosed(fd) { return false }
        let buffer = Array(bytes)
        var offset = 0
        while offset < buffer.count {
            let n = buffer[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                offset += n
                continue
            }
            if n < 0, errno == EINTR || errno == EAGAIN { continue }
            // EPIPE, or any other failure: the output is unusable; stop writing to it.
            markClosed(fd)
            return false
        }
        return true
    }

    static func isClosed(_ fd: Int32) -> Bool { state.withLock { $0.closed.contains(fd) } }

    /// Runs `handler` once when stdout or stderr turns out to be closed (at once if one is).
    static func whenClosed(_ handler: @escaping @Sendable () -> Void) {
        let closedAlready = state.withLock { s -> Bool in
            if s.closed.isEmpty { s.handlers.append(handler) }
            return !s.closed.isEmpty
        }
        if closedAlready { handler() }
    }

    private static func markClosed(_ fd: Int32) {
        let handlers = state.withLock { s -> [@Sendable () -> Void] in
            guard s.closed.insert(fd).inserted else { return [] }
            defer { s.handlers = [] }
            return s.handlers
        }
        for handler in handlers { handler() }
    }
}

/// Writes a line to stdout at once: output read by a pipe must not wait in a buffer.
func emit(_ line: String) {
    StandardStreams.write(Array((line + "\n").utf8), to: STDOUT_FILENO)
}

/// Writes a line to stderr: notes for people that scripts reading stdout should not see.
func note(_ line: String) {
    StandardStreams.write(Array((line + "\n").utf8), to: STDERR_FILENO)
}

extension DaemonOutput {
    /// Notes to stderr, output proper to stdout: how the command shows what the daemon
    /// library has to say.
    static let standardStreams = DaemonOutput(
        note: { StandardStreams.write(Array(($0 + "\n").utf8), to: STDERR_FILENO) },
        emit: { StandardStreams.write(Array(($0 + "\n").utf8), to: STDOUT_FILENO) })
}
