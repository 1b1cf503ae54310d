import HearthCore
import HearthSync

/// Monotonic time that counts only what this process could run: the in-memory network's engine
/// clock (heartbeats, link and hello timeouts, dial back-off) and the bound of its waits.
///
/// Both ends of an in-memory link live in one process. When that process stalls (the machine
/// beside CPU hogs, the cooperative pool taken by other tests' work), each end's peer is silent
/// only because the end itself did not run: on wall time both ends then call the link dead, or a
/// test's wait runs out, though nothing in the code under test is wrong. On this clock a stall
/// does not count. A task on the cooperative pool ticks every ``tick``; the gap since the last
/// tick counts in full up to ``cap`` and as ``cap`` beyond it (the gap was the pool or the
/// process not running). An idle process ticks on time, so on a quiet machine this clock runs
/// as wall time does, and a wait for an event that never comes still ends at its bound.
package enum RunTime {
    /// How often the clock's task runs.
    package static let tick: Duration = .milliseconds(10)
    /// The most one gap between ticks counts: longer gaps were stalls.
    package static let cap: Duration = .milliseconds(100)

    /// The clock's reckoning, a value: what each tick counts, and now between ticks.
    package struct Reckoning: Sendable {
        package private(set) var lastTick: ContinuousClock.Instant
        /// Now on this clock at ``lastTick``.
        package private(set) var counted: ContinuousClock.Instant
        let cap: Duration

        package init(start: ContinuousClock.Instant, cap: Duration = RunTime.cap) {
            lastTick = start
            counted = start
            self.cap = cap
        }

        /// A tick ran at `wall`: the gap since the last counts, up to the cap.
        package mutating func tick(at wall: ContinuousClock.Instant) {
            counted = now(at: wall)
            lastTick = wall
        }

        /// Now on this clock, read at `wall` (between ticks: never past what the next tick counts).
        package func now(at wall: ContinuousClock.Instant) -> ContinuousClock.Instant {
            counted + min(wall - lastTick, cap)
        }
    }

    /// Started on first use; ticks for the life of the process (a test process).
    private static let reckoning: Locked<Reckoning> = {
        let reckoning = Locked(Reckoning(start: .now))
        Task.detached {
            while true {
                try? await Task.sleep(for: tick)
                reckoning.withLock { $0.tick(at: .now) }
            }
        }
        return reckoning
    }()

    /// Now on this clock.
    package static func now() -> ContinuousClock.Instant {
        reckoning.withLock { $0.now(at: .now) }
    }

    /// Waits `duration` of this clock (at least as long on wall time); throws when cancelled.
    package static func sleep(for duration: Duration) async throws {
        let target = now() + duration
        while true {
            let left = target - now()
            guard left > .zero else { return }
            try await Task.sleep(for: left)
        }
    }

    /// The system's wall clock for stamps, this clock for intervals: an in-memory engine's clock.
    package static var syncClock: SyncClock {
        SyncClock(wallMilliseconds: SyncClock.system.wallMilliseconds, now: { now() }, sleep: { try await sleep(for: $0) })
    }

    /// Whether `condition` held before `bound` of this clock passed, checked at once and after
    /// each change of `observing` (as ``ChangeSignal/waitUntil(_:observing:_:)``, whose timer is
    /// on wall time: when it fires while this clock lags, the wait goes on for what is left).
    /// Seen to hold only when a timer fired, not after a signal, counts as not: no event
    /// announced the change (a signal missing in the code under test), and a test must not pass
    /// by timing.
    package static func wait(for bound: Duration, observing: () -> [ChangeSignal], _ condition: () -> Bool) async -> Bool {
        let deadline = now() + bound
        var signalled = true   // the first check counts, as does each after a signal
        while true {
            // Generations first: a change after the check moves one of them, so the wait returns.
            let observed = observing().map { (signal: $0, seen: $0.generation) }
            if condition() { return signalled && now() < deadline }
            guard now() < deadline, !Task.isCancelled else { return false }
            await ChangeSignal.wait(for: observed, until: ContinuousClock.now + (deadline - now()))
            signalled = observed.contains { $0.signal.generation != $0.seen }
        }
    }
}
