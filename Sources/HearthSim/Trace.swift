import Foundation
import HearthCore
import HearthIdentity

/// What happened in one run, as lines of text stamped with virtual time: hashed as they come
/// (the run's digest, which two runs of one seed must share), the last ones kept to print when
/// an invariant fails.
///
/// A line names devices by index (`d3`) and entries by stamp and origin, never by what
/// differs between runs of one seed (certificate bytes: their serial numbers are random).
final class Trace: Sendable {
    private struct State {
        var pending: [UInt8] = []
        var chain: [UInt8] = []
        var count = 0
        var recent: [String] = []
        var echo = false
    }

    private let state = Locked(State())
    private let clock: @Sendable () -> Duration
    /// How many of the last lines a failure prints.
    static let kept = 60

    init(clock: @escaping @Sendable () -> Duration, echo: Bool = false) {
        self.clock = clock
        state.withLock { $0.echo = echo }
    }

    /// Adds one event.
    func log(_ event: String) {
        let line = "\(Self.format(clock())) \(event)"
        let echo = state.withLock { s -> Bool in
            s.count += 1
            s.pending.append(contentsOf: line.utf8)
            s.pending.append(10)
            // Hashed in blocks: a SHA-256 per line would cost more than most events.
            if s.pending.count >= 1 << 16 { Self.fold(&s) }
            s.recent.append(line)
            if s.recent.count > 2 * Self.kept { s.recent.removeFirst(s.recent.count - Self.kept) }
            return s.echo
        }
        if echo { print(line) }
    }

    /// How many events so far.
    var count: Int { state.withLock { $0.count } }

    /// The last events, oldest first.
    var lastEvents: [String] { state.withLock { Array($0.recent.suffix(Self.kept)) } }

    /// SHA-256 of every line so far (chained by block).
    var digest: [UInt8] {
        state.withLock { s in
            Self.fold(&s)
            return s.chain
        }
    }

    private static func fold(_ s: inout State) {
        guard !s.pending.isEmpty || s.chain.isEmpty else { return }
        s.chain = SHA256.hash(s.chain + s.pending)
        s.pending = []
    }

    /// `h:mm:ss.mmm` of virtual time. By hand: `String(format:)` took a tenth of the trace's cost.
    static func format(_ time: Duration) -> String {
        let milliseconds = time.components.seconds * 1000 + time.components.attoseconds / 1_000_000_000_000_000
        let (seconds, ms) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        func padded(_ n: Int64, _ width: Int) -> String {
            let digits = String(n)
            return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
        }
        return "\(seconds / 3600):\(padded(seconds / 60 % 60, 2)):\(padded(seconds % 60, 2)).\(padded(ms, 3))"
    }
}
