/// Tells waiting tasks that some state changed, so that they check it again: how a task waits
/// for a condition with a deadline without polling it.
///
/// The owner of the state calls ``signal()`` after each change that may matter (outside its own
/// lock: waiters are resumed right there). A waiter reads ``generation`` before it checks its
/// condition, then waits for the generation to move on (``wait(for:until:)``), so a change
/// between its check and its wait is never lost; ``waitUntil(_:observing:_:)`` does all that.
///
/// ```swift
/// let hosted = ChangeSignal()
/// // the owner, after a change:          hosted.signal()
/// // a waiter, at most 5 s:
/// let ok = await ChangeSignal.waitUntil(.now + .seconds(5), observing: { [hosted] }) { isHosted(id) }
/// ```
package final class ChangeSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [ObjectIdentifier: Waiter] = [:]
    }

    private let state = Locked(State())

    package init() {}

    /// How many times ``signal()`` has been called.
    package var generation: UInt64 { state.withLock(\.generation) }

    /// How many waits are registered now (for tests: a waiter is asleep once it counts here).
    package var waiting: Int { state.withLock(\.waiters.count) }

    /// Something changed: every waiting task resumes (and checks its condition again). Cheap
    /// with no waiter (one lock); never blocks. Call it outside the locks a waiter's condition
    /// takes.
    package func signal() {
        let waiters = state.withLock { s -> [Waiter] in
            s.generation &+= 1
            guard !s.waiters.isEmpty else { return [] }
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        // Outside the lock: resuming runs no code of the waiter here, but keeps the lock short.
        for waiter in waiters { waiter.resume() }
    }

    /// Registers `waiter` unless the generation moved past `seen` already; false then.
    private func add(_ waiter: Waiter, ifStill seen: UInt64) -> Bool {
        state.withLock { s in
            guard s.generation == seen else { return false }
            s.waiters[ObjectIdentifier(waiter)] = waiter
            return true
        }
    }

    private func remove(_ waiter: Waiter) {
        state.withLock { s in s.waiters[ObjectIdentifier(waiter)] = nil }
    }

    /// Returns once one of `observed` has been signalled since the generation given with it,
    /// `deadline` has passed, or the task is cancelled, whichever comes first. The deadline is a
    /// timer task, cancelled as soon as a signal comes.
    package static func wait(for observed: [(signal: ChangeSignal, seen: UInt64)], until deadline: ContinuousClock.Instant) async {
        let waiter = Waiter()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                waiter.install(continuation)
                for (signal, seen) in observed where !signal.add(waiter, ifStill: seen) {
                    waiter.resume()
                }
                waiter.startTimer(until: deadline)
            }
        } onCancel: {
            waiter.resume()
        }
        for (signal, _) in observed { signal.remove(waiter) }
        waiter.stopTimer()
    }

    /// Waits until `condition` holds (true) or `deadline` passes (false), checking it at once,
    /// then again each time one of the signals `observing` returns is signalled, and once more
    /// at the deadline (a busy machine may run this task only after it). `observing` is asked
    /// anew before each check: the signals to follow may change with the state (a store's sync
    /// engine replaced, say). A cancelled task stops waiting and gets the condition's value.
    package static func waitUntil(_ deadline: ContinuousClock.Instant, observing: () -> [ChangeSignal],
                                  _ condition: () -> Bool) async -> Bool {
        while true {
            // Generations first: a change after the check moves one of them, so the wait returns.
            let observed = observing().map { (signal: $0, seen: $0.generation) }
            if condition() { return true }
            guard ContinuousClock.now < deadline, !Task.isCancelled else { return false }
            await wait(for: observed, until: deadline)
        }
    }

    /// One waiting task: resumed once, by whichever comes first (a signal, the deadline,
    /// cancellation).
    private final class Waiter: Sendable {
        private struct State {
            var continuation: CheckedContinuation<Void, Never>?
            var resumed = false
            var timer: Task<Void, Never>?
        }

        private let state = Locked(State())

        func install(_ continuation: CheckedContinuation<Void, Never>) {
            let now = state.withLock { s -> Bool in
                guard !s.resumed else { return true }
                s.continuation = continuation
                return false
            }
            if now { continuation.resume() }
        }

        func resume() {
            let continuation = state.withLock { s -> CheckedContinuation<Void, Never>? in
                s.resumed = true
                defer { s.continuation = nil }
                return s.continuation
            }
            continuation?.resume()
        }

        func startTimer(until deadline: ContinuousClock.Instant) {
            let timer = Task { [weak self] in
                try? await Task.sleep(until: deadline, clock: .continuous)
                self?.resume()
            }
            let stop = state.withLock { s -> Bool in
                s.timer = timer
                return s.resumed
            }
            if stop { timer.cancel() }
        }

        func stopTimer() {
            state.withLock { s in defer { s.timer = nil }; return s.timer }?.cancel()
        }
    }
}
