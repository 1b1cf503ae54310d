import Dispatch
import Foundation

/// Waits for SIGINT or SIGTERM through DispatchSourceSignal, so long-running commands can
/// shut down cleanly (flush, close connections) instead of dying mid-write.
final class SignalWaiter {
    private let sources: [any DispatchSourceSignal]
    private let stream: AsyncStream<Int32>

    init(_ signals: [Int32] = [SIGINT, SIGTERM]) {
        let (stream, continuation) = AsyncStream<Int32>.makeStream()
        self.stream = stream
        let queue = DispatchQueue(label: "hearth.signals")
        sources = signals.map { number in
            // The default action would kill the process before the source sees the signal.
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
    }

    /// Returns the first signal received.
    func wait() async -> Int32 {
        for await number in stream { return number }
        return SIGTERM
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
