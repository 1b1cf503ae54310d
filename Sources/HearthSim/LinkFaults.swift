import Foundation
import HearthCore
import HearthSync
import NIOCore

/// The faults of a link between two devices beyond a cut (docs/simulator.md, "What a run
/// does"): stalls, slow links (a delay and a bandwidth), flaps (the pair cut and refused
/// again and again) and half-open links. Each is a state of the LAN that a writer or a dial
/// consults; none reorders a connection's frames (a writer waits, and waits in order).
///
/// A stall or a slow spell holds the pair's writers back: a writer is the only one writing
/// its link (`SessionWriter`), so what it holds back stays in order, and what the session posts
/// meanwhile coalesces in its mailbox, as a TCP send buffer that is full makes it do.
final class LinkFaults: Sendable {
    /// Two devices, unordered: a fault of the path between them is a fault of each connection.
    struct Pair: Hashable, Sendable, CustomStringConvertible {
        let low: Int
        let high: Int
        init(_ a: Int, _ b: Int) { (low, high) = (min(a, b), max(a, b)) }
        var description: String { "d\(low)-d\(high)" }
    }

    /// A link that delivers late and slowly until `until`.
    struct Slowness: Sendable {
        let until: Duration
        /// Each write reaches the peer this much later (on top of the LAN's 1 to 20 ms).
        let latency: Duration
        /// At most this many bytes per virtual second, each write waiting for its bytes to pass.
        let bytesPerSecond: Int
    }

    private struct State {
        var stalls: [Pair: Duration] = [:]
        var slow: [Pair: Slowness] = [:]
        /// Pairs cut by a flap: no link between them, no dial.
        var blocked: Set<Pair> = []
        /// The workload is over: no new stall, slow spell or flap (a flap's later steps included).
        var healed = false
    }

    private let state = Locked(State())

    /// The pair's writers wait until `until` (virtual time). False once healed.
    @discardableResult
    func stall(_ pair: Pair, until: Duration) -> Bool {
        state.withLock { s in
            guard !s.healed else { return false }
            s.stalls[pair] = max(s.stalls[pair] ?? .zero, until)
            return true
        }
    }

    @discardableResult
    func slow(_ pair: Pair, _ slowness: Slowness) -> Bool {
        state.withLock { s in
            guard !s.healed else { return false }
            s.slow[pair] = slowness
            return true
        }
    }

    /// Cuts the pair off (a flap's down step) or lets it dial again. False once healed.
    @discardableResult
    func block(_ pair: Pair, _ blocked: Bool) -> Bool {
        state.withLock { s in
            guard !s.healed else { return false }
            if blocked { s.blocked.insert(pair) } else { s.blocked.remove(pair) }
            return true
        }
    }

    func isBlocked(_ a: Int, _ b: Int) -> Bool { state.withLock { $0.blocked.contains(Pair(a, b)) } }

    /// Ends every stall, slow spell and flap for good (the household's heal at the end of the
    /// workload). Half-open links are left to the engines' heartbeats.
    func healAll() {
        state.withLock { $0 = State(healed: true) }
    }

    /// Waits, before a write of `bytes` from `local` to `remote`, as long as a stall or a slow
    /// spell of their pair says; returns at once (no suspension, no job) when neither holds.
    func pass(from local: Int, to remote: Int, bytes: Int, executor: SimulationExecutor) async throws {
        let pair = Pair(local, remote)
        while true {
            let now = executor.now
            let (stalled, slowness) = state.withLock { s in (s.stalls[pair].flatMap { $0 > now ? $0 : nil }, s.slow[pair]) }
            if let stalled {
                try await executor.sleep(for: stalled - now)
                continue
            }
            guard let slowness, slowness.until > now else { return }
            // Whole milliseconds: a write's time depends on its size alone.
            let transfer = Duration.milliseconds(Int64(bytes) * 1000 / Int64(max(1, slowness.bytesPerSecond)))
            try await executor.sleep(for: slowness.latency + transfer)
            return
        }
    }
}

/// One end of a link, as the faults see it. Half-open: the peer's end is gone (its session
/// ended, as when the peer's machine dropped the connection without a word reaching us), while
/// this end still thinks the link is up: what it writes vanishes, and its reader waits for
/// frames that never come, until its own session gives up on the link (its heartbeat: no
/// frame for longer than the allowed silence) and closes it.
final class LinkEndControl: Sendable {
    private struct State {
        var halfOpen = false
        var closed = false
        /// Closed first by a fault (a cut, a reset, a crash), not by its own session.
        var cut = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Locked(State())

    var isHalfOpen: Bool { state.withLock { $0.halfOpen } }
    /// Whether a fault closed this end before its session did.
    var wasCut: Bool { state.withLock { $0.cut } }

    /// From now on, this end is the survivor of a half-open link.
    func makeHalfOpen() { state.withLock { $0.halfOpen = true } }

    /// This side closes its end (its session, or a fault: `cut`): a half-open reader stops waiting.
    func close(cut: Bool = false) {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if !s.closed { s.cut = cut }
            s.closed = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Waits until this side closes the end (or the reader's task is cancelled).
    fileprivate func waitForClose() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let closed = state.withLock { s -> Bool in
                    if s.closed { return true }
                    s.waiter = continuation
                    return false
                }
                if closed { continuation.resume() }
            }
        } onCancel: {
            close()
        }
    }
}

/// A link end's inbound frames, as its session reads them: the in-memory link's, except that
/// on a half-open end the link's end is not seen (the peer's close never reached us) until
/// this side closes the end itself.
struct FaultyInbound<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let control: LinkEndControl

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let control: LinkEndControl

        mutating func next() async throws -> ByteBuffer? {
            do {
                if let frame = try await base.next() { return frame }
            } catch where control.isHalfOpen {
                // The link's error (a reset) did not reach this end either.
            }
            if control.isHalfOpen { await control.waitForClose() }
            return nil
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), control: control) }
}
