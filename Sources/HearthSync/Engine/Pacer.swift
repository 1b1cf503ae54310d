/// Paces one kind of frame from a peer: up to `burst` at once, then one per `spacing`. A frame
/// that comes sooner is not refused: the reader waits until its turn (``arrived(at:)``), so
/// the peer's frames queue in its own socket buffer (TCP's backpressure) and cost this device
/// nothing meanwhile; after a minute of that, the link is closed (``exhausted``). An honest
/// peer never waits: the bounds are far above what it sends.
/// (A generic cell rate algorithm: `due` is when the frame after the burst would be on time.)
package struct Pacer: Sendable, Equatable {
    package let spacing: Duration
    package let burst: Int
    private var due: ContinuousClock.Instant?
    /// Frames that had to wait.
    package private(set) var delayed = 0
    /// Frames that had to wait since the last that did not: a peer that keeps its frames
    /// waiting this long (``exhausted``) is flooding, and its link is closed rather than kept
    /// reading a backlog that may fill its socket buffers for hours.
    package private(set) var waitedInARow = 0
    /// How many waits in a row make ``exhausted``: a minute of frames at the pace.
    package var maximumWaitsInARow: Int { max(1, Int(Duration.seconds(60) / spacing)) }
    package var exhausted: Bool { waitedInARow >= maximumWaitsInARow }

    package init(spacing: Duration, burst: Int) {
        self.spacing = spacing
        self.burst = burst
    }

    /// A frame arrived at `now`: how long to wait before handling it (zero within the pace).
    package mutating func arrived(at now: ContinuousClock.Instant) -> Duration {
        let next = max(due ?? now, now) + spacing
        due = next
        let wait = next - now - spacing * burst
        guard wait > .zero else {
            waitedInARow = 0
            return .zero
        }
        delayed += 1
        waitedInARow += 1
        return wait
    }
}
