import HearthCore
import Testing

/// A wait for a condition is an event with a deadline (issue 27): the waiter resumes when the
/// state's owner signals, not at its next poll, and a deadline ends it with `false`.
@Suite("Change signals")
struct ChangeSignalTests {
    /// Far enough that a wait ending before it was ended by the signal, not by the deadline.
    static let far = Duration.seconds(30)

    /// Returns once a wait is registered on `signal` (the waiter is asleep).
    static func untilWaiting(_ signal: ChangeSignal) async {
        while signal.waiting == 0 { await Task.yield() }
    }

    @Test("A waiter resumes as soon as the state changes and is signalled, well before its deadline")
    func resumesOnSignal() async {
        let signal = ChangeSignal()
        let done = Locked(false)
        let deadline = ContinuousClock.now + Self.far
        let waiter = Task { await ChangeSignal.waitUntil(deadline, observing: { [signal] }) { done.withLock { $0 } } }
        await Self.untilWaiting(signal)
        done.withLock { $0 = true }
        signal.signal()
        #expect(await waiter.value)
        #expect(ContinuousClock.now < deadline)
        #expect(signal.waiting == 0)
    }

    @Test("A change made between the waiter's check and its wait is not lost")
    func changeDuringCheck() async {
        let signal = ChangeSignal()
        let state = Locked(0)
        let deadline = ContinuousClock.now + Self.far
        // The first check finds it false, and the state changes (and is signalled) right then:
        // the generation read before the check has moved, so the wait returns at once.
        let ok = await ChangeSignal.waitUntil(deadline, observing: { [signal] }) {
            let seen = state.withLock { s in defer { s += 1 }; return s }
            if seen == 0 { signal.signal() }
            return seen > 0
        }
        #expect(ok)
        #expect(ContinuousClock.now < deadline)
    }

    @Test("Any of several signals wakes the waiter, and the signals to follow are asked anew before each wait")
    func severalSignals() async {
        let first = ChangeSignal(), second = ChangeSignal(), third = ChangeSignal()
        // Which signal the condition depends on changes between checks, as a store's sync
        // engine may: at step 0 it follows `second`, from step 1 on `third`.
        let step = Locked(0)
        let deadline = ContinuousClock.now + Self.far
        let ok = await ChangeSignal.waitUntil(deadline, observing: { step.withLock { $0 } == 0 ? [first, second] : [first, third] }) {
            let now = step.withLock { s in defer { s += 1 }; return s }
            if now == 0 { second.signal() }
            if now == 1 { third.signal() }
            return now == 2
        }
        #expect(ok)
        #expect(ContinuousClock.now < deadline)
        #expect(first.waiting == 0 && second.waiting == 0 && third.waiting == 0)
    }

    @Test("The deadline ends a wait nobody signals with false, once the condition is checked again")
    func deadline() async {
        let signal = ChangeSignal()
        let checks = Locked(0)
        let start = ContinuousClock.now
        let ok = await ChangeSignal.waitUntil(start + .milliseconds(50), observing: { [signal] }) {
            checks.withLock { $0 += 1 }
            return false
        }
        #expect(!ok)
        #expect(ContinuousClock.now - start >= .milliseconds(50))
        // Once at the start and once at the deadline: nothing polled in between.
        #expect(checks.withLock { $0 } == 2)
    }

    @Test("Cancelling the waiting task ends the wait at once")
    func cancellation() async {
        let signal = ChangeSignal()
        let deadline = ContinuousClock.now + Self.far
        let waiter = Task { await ChangeSignal.waitUntil(deadline, observing: { [signal] }) { false } }
        await Self.untilWaiting(signal)
        waiter.cancel()
        #expect(await waiter.value == false)
        #expect(ContinuousClock.now < deadline)
    }

    @Test("A signal with no waiter only counts; a waiter's registration is gone after its wait")
    func generations() async {
        let signal = ChangeSignal()
        #expect(signal.generation == 0)
        signal.signal()
        signal.signal()
        #expect(signal.generation == 2)
        // A wait for a generation that has moved on returns at once.
        let start = ContinuousClock.now
        await ChangeSignal.wait(for: [(signal, 1)], until: start + Self.far)
        #expect(ContinuousClock.now - start < Self.far)
    }
}
