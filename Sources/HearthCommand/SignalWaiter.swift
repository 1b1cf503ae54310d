import Dispatch
import Foundation
import HearthCore
import HearthDaemon

/// Why a long-running command (`watch`, `serve`) stops.
enum StopReason: Sendable, Equatable {
    /// SIGINT or SIGTERM.
    case signal(Int32)
    /// Standard output or standard error was closed by its reader (EPIPE): nobody is
    /// listening any more, so stop as on SIGTERM, quietly.
    case outputClosed
}

/// Waits for SIGINT or SIGTERM through DispatchSourceSignal, or for the output to be closed,
/// so long-running commands can shut down cleanly (flush, close connections) instead of dying
/// mid-write.
final class SignalWaiter {
    private let sources: [any DispatchSourceSignal]
    private let stream: AsyncStream<StopReason>
    let stopper: Stopper

    /// Records the first stop reason and hands it to ``wait()``; usable from any thread.
    final class Stopper: Sendable {
        private let continuation: AsyncStream<StopReason>.Continuation
        private let first = Locked<StopReason?>(nil)

        init(_ continuation: AsyncStream<StopReason>.Continuation) { self.continuation = continuation }

        func stop(_ reason: StopReason) {
            first.withLock { if $0 == nil { $0 = reason } }
            continuation.yield(reason)
            stopped.signal()
        }

        /// The first reason received, if any.
        var reason: StopReason? { first.withLock { $0 } }
        /// Signalled at each stop: a wait for something else checks ``reason`` then.
        let stopped = ChangeSignal()
    }

    init(_ signals: [Int32] = [SIGINT, SIGTERM]) {
        let (stream, continuation) = AsyncStream<StopReason>.makeStream()
        self.stream = stream
        let stopper = Stopper(continuation)
        self.stopper = stopper
        let queue = DispatchQueue(label: "hearth.signals")
        sources = signals.map { number in
            // The default action would kill the process before the source sees the signal.
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { stopper.stop(.signal(number)) }
            source.resume()
            return source
        }
        StandardStreams.whenClosed { stopper.stop(.outputClosed) }
    }

    /// Returns the first stop reason.
    func wait() async -> StopReason {
        for await reason in stream { return reason }
        return .signal(SIGTERM)
    }

    /// Unblocks SIGINT and SIGTERM: a parent (a test runner, say) may have passed on a mask
    /// that blocks them, and then no signal source would ever fire.
    static func unblockTerminationSignals() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }
}
