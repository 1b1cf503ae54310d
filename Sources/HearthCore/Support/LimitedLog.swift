import Logging

/// Which log lines to let through: at most one per key (a peer and a kind of complaint) per
/// interval, each counting the lines left out since the last. A value, with the time passed
/// in, so that tests drive it without a clock; ``LimitedLog`` is its shell.
package struct LogLimiter: Sendable {
    package let interval: Duration
    /// At most this many keys are remembered (one per peer and kind: a household has a few
    /// devices and each a few kinds of complaint). When full, keys older than the interval go;
    /// if all are recent, every key is forgotten (a line each again, bounded all the same).
    package let maximumKeys: Int
    private var keys: [String: (logged: ContinuousClock.Instant, suppressed: Int)] = [:]

    package init(interval: Duration = .seconds(60), maximumKeys: Int = 1024) {
        self.interval = interval
        self.maximumKeys = maximumKeys
    }

    /// A line of `key` at `now`: nil if it is to be left out (counted), else how many lines of
    /// `key` were left out since the last one logged.
    package mutating func admit(_ key: String, now: ContinuousClock.Instant) -> Int? {
        if let kept = keys[key], now - kept.logged < interval {
            keys[key]!.suppressed += 1
            return nil
        }
        let suppressed = keys[key]?.suppressed ?? 0
        if keys[key] == nil, keys.count >= maximumKeys {
            keys = keys.filter { now - $0.value.logged < interval }
            if keys.count >= maximumKeys { keys.removeAll() }
        }
        keys[key] = (now, 0)
        return suppressed
    }
}

/// A log for what a peer can make this device say in a loop (a forged record, a flood of
/// heartbeats): each kind of line from each peer is logged at most once a minute, and the
/// next one says how many were left out. One per engine, shared by its connections, so a
/// peer that reconnects does not get a fresh allowance.
///
/// ```swift
/// let log = LimitedLog()
/// log.log(.warning, "ignoring a forged removal", kind: "forged removal", peer: "\(peer)", to: logger)
/// ```
package final class LimitedLog: Sendable {
    private let limiter: Locked<LogLimiter>

    package init(interval: Duration = .seconds(60), maximumKeys: Int = 1024) {
        limiter = Locked(LogLimiter(interval: interval, maximumKeys: maximumKeys))
    }

    /// Logs `message` to `logger` at `level` unless a line of this `kind` from `peer` was
    /// logged less than the interval before `now`. Returns whether it was logged.
    @discardableResult
    package func log(_ level: Logger.Level, _ message: @autoclosure () -> String, kind: String, peer: String,
                     to logger: Logger, metadata: Logger.Metadata? = nil, now: ContinuousClock.Instant = .now) -> Bool {
        guard logger.logLevel <= level else { return false }
        guard let suppressed = limiter.withLock({ $0.admit("\(peer)\u{0}\(kind)", now: now) }) else { return false }
        let interval = limiter.withLock { $0.interval }
        let note = suppressed == 0 ? "" : " (\(suppressed) more like it from this peer not logged; at most one a \(interval == .seconds(60) ? "minute" : "\(interval)"))"
        logger.log(level: level, "\(message())\(note)", metadata: metadata)
        return true
    }
}
