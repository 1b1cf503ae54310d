import HearthCore
import HearthTesting
import Testing

/// The tests' wait on the in-memory network (`InMemoryNetwork.until`): it wakes on signals,
/// never on a timer, and a change no signal announces fails it.
@Suite("Waiting on the in-memory network's events")
struct WaitOnEventsTests {
    @Test("until returns on the signal that follows a change, and fails at the deadline on a change no event announces")
    func untilFollowsSignals() async throws {
        let network = InMemoryNetwork()
        // Until the waiter is asleep on the network's signal, past its first check (bounded: a
        // wait that never listens must fail this test, not hang it).
        func asleep() async {
            let bound = ContinuousClock.now + .seconds(30)
            while network.changes.waiting == 0, ContinuousClock.now < bound { await Task.yield() }
        }
        let announced = Locked(false)
        let waiter = Task { try await network.until("the announced change") { announced.withLock { $0 } } }
        await asleep()
        announced.withLock { $0 = true }
        network.changes.signal()
        try await waiter.value   // long before its 30 s deadline

        let silent = Locked(false)
        let failing = Task { try await network.until("the silent change", deadline: .milliseconds(300)) { silent.withLock { $0 } } }
        await asleep()
        silent.withLock { $0 = true }   // no signal: seen only at the deadline
        await #expect(throws: InMemoryNetworkError.self) { try await failing.value }
    }
}
