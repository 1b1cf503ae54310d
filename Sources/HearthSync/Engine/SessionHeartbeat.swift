import Foundation

/// The liveness of one connection as a value, part of its ``SessionState``: when frames went
/// and came, how fast the peer may send pings, pongs and removals (``Pacer``), when to ping,
/// and when the link is dead. Times are given to it (the engine's clock); it reads none.
package struct SessionHeartbeat: Sendable {
    /// What a heartbeat tick found (``heartbeat(now:timeout:interval:)``).
    package enum Beat: Sendable, Equatable {
        /// Nothing to do.
        case alive
        /// We sent nothing for an interval: a ping is due (``SessionState`` posts it).
        case ping
        /// The peer said nothing for too long: end the session with this reason.
        case silent(String)
    }

    /// Paces the peer's pings and pongs (``heartbeatArrived(at:)``).
    package private(set) var heartbeats = Pacer(spacing: Self.heartbeatSpacing, burst: Self.heartbeatBurst)
    /// Paces the peer's `removals` messages (``removalsArrived(at:)``).
    package private(set) var removalMessages = Pacer(spacing: Self.removalsSpacing, burst: Self.removalsBurst)
    package private(set) var lastHeard: ContinuousClock.Instant
    package private(set) var lastSent: ContinuousClock.Instant
    /// When a frame other than a ping or pong last went out or came in: how long the link has
    /// been idle, which spaces its heartbeats out (``pingInterval(now:interval:)``).
    package private(set) var lastActivity: ContinuousClock.Instant
    /// Whether we dialled this connection: with a peer that takes sparse heartbeats, only the
    /// dialler pings (the other answers).
    package let dialled: Bool

    /// Pings and pongs a peer may send at once, then one per ``heartbeatSpacing`` (10 a second).
    /// An honest peer pings at most once per its heartbeat interval (30 s by default, 300 ms in
    /// the fastest tests) and pongs once per our ping: far below. One that floods them has its
    /// frames read at this pace: each costs a counter, and the answers ten small frames a second
    /// (and after a minute of that, its link is closed: ``Pacer/exhausted``).
    package static var heartbeatBurst: Int { 20 }
    package static var heartbeatSpacing: Duration { .milliseconds(100) }

    /// `removals` messages a peer may send at once, then one per ``removalsSpacing``. An honest
    /// peer sends one after the hellos when the digests differ and one per removal it learns
    /// (about one per device of the household when the owner removes one): far below.
    package static var removalsBurst: Int { 16 }
    package static var removalsSpacing: Duration { .seconds(1) }

    package init(now: ContinuousClock.Instant, dialled: Bool) {
        lastHeard = now
        lastSent = now
        lastActivity = now
        self.dialled = dialled
    }

    /// A ping or pong arrived at `now`: how long the reader waits before handling it (zero
    /// unless the peer sends them faster than ``heartbeatSpacing`` after a burst).
    package mutating func heartbeatArrived(at now: ContinuousClock.Instant) -> Duration { heartbeats.arrived(at: now) }

    /// A `removals` message arrived at `now`: how long the reader waits before handling it.
    package mutating func removalsArrived(at now: ContinuousClock.Instant) -> Duration { removalMessages.arrived(at: now) }

    /// A frame went out at `now`.
    package mutating func sent(at now: ContinuousClock.Instant) { lastSent = now }

    /// A frame arrived at `now`.
    package mutating func heard(at now: ContinuousClock.Instant) { lastHeard = now }

    /// A frame other than a ping or pong went out or came in at `now`: the link is in use, and
    /// its heartbeat is back to the interval.
    package mutating func active(at now: ContinuousClock.Instant) { lastActivity = now }

    /// How many heartbeat intervals apart pings may get on an idle link.
    package static var maximumIdleFactor: Int { 8 }

    /// Whether the heartbeat is sparse: the peer's hello said it takes `links`, which builds
    /// that space heartbeats out and answer pings with their vectors have said since.
    package var sparse = false
    /// Set once the peer's hello is verified; before that no ping may be sent.
    package var greeted = false

    /// How long the pinging side waits, having sent nothing, before it pings: the heartbeat
    /// interval while the link is in use; once idle, a quarter of the time it has been idle,
    /// up to ``maximumIdleFactor`` intervals (4 minutes by default). The kernel's TCP keepalive
    /// and user timeout still drop a link to a vanished machine within 90 s, without waking us.
    package func pingInterval(now: ContinuousClock.Instant, interval: Duration) -> Duration {
        guard sparse else { return interval }
        return min(interval * Self.maximumIdleFactor, max(interval, (now - lastActivity) / 4))
    }

    /// How long the peer may say nothing: the timeout, or two of its ping intervals once those
    /// are longer (an idle peer that went quiet at the start of the idle time is still noticed
    /// within the timeout: the allowance grows at half the speed of the silence).
    package func allowedSilence(now: ContinuousClock.Instant, timeout: Duration, interval: Duration) -> Duration {
        sparse ? max(timeout, pingInterval(now: now, interval: interval) * 2) : timeout
    }

    /// Whether we ping on this link: always with an older build; with a sparse one, only the
    /// side that dialled.
    package var pings: Bool { !sparse || dialled }

    /// How long until the next heartbeat tick: a few times per allowed silence, so that a dead
    /// link is noticed within it plus a third; before the hello, by its shorter timeout.
    package func heartbeatDelay(now: ContinuousClock.Instant, timeout: Duration, interval: Duration) -> Duration {
        let tick = tick(now: now, timeout: timeout, interval: interval)
        return greeted ? tick : min(tick, Self.helloTimeout(timeout))
    }

    /// A heartbeat tick at `now`: a peer silent for longer than allowed (or without a hello for
    /// its shorter timeout) is dead; a link on which the pinging side sent nothing for a ping
    /// interval gets a ping.
    package mutating func heartbeat(now: ContinuousClock.Instant, timeout: Duration, interval: Duration) -> Beat {
        let silence = now - lastHeard
        guard greeted else {
            let helloTimeout = Self.helloTimeout(timeout)
            return silence > helloTimeout ? .silent("no hello from the peer within \(helloTimeout)") : .alive
        }
        if silence > allowedSilence(now: now, timeout: timeout, interval: interval) {
            return .silent("no frame from the peer for \(silence); the link is dead")
        }
        guard pings else { return .alive }
        let tick = tick(now: now, timeout: timeout, interval: interval)
        guard now - lastSent >= pingInterval(now: now, interval: interval) - tick / 10 else { return .alive }
        return .ping
    }

    private static func helloTimeout(_ timeout: Duration) -> Duration { min(timeout, .seconds(5)) }

    private func tick(now: ContinuousClock.Instant, timeout: Duration, interval: Duration) -> Duration {
        min(pingInterval(now: now, interval: interval), allowedSilence(now: now, timeout: timeout, interval: interval) / 3)
    }}
