import HearthCore
import HearthTesting
import Testing

/// The in-memory network's clock (`RunTime`): a stall of the process does not count, so both
/// ends of an in-memory link do not call each other dead because neither ran.
@Suite("RunTime")
struct RunTimeTests {
    let start = ContinuousClock.now

    @Test("Ticks on time count in full: on a quiet machine RunTime runs as wall time does")
    func ticksOnTimeCount() {
        var reckoning = RunTime.Reckoning(start: start)
        for i in 1...100 { reckoning.tick(at: start + .milliseconds(10 * i)) }
        #expect(reckoning.now(at: start + .seconds(1)) == start + .seconds(1))
    }

    @Test("A stall counts as one cap however long it was; readings during it never go back")
    func stallCountsAsCap() {
        var reckoning = RunTime.Reckoning(start: start, cap: .milliseconds(100))
        reckoning.tick(at: start + .milliseconds(10))
        // Five seconds without a tick: the pool or the process did not run.
        let during = reckoning.now(at: start + .seconds(3))
        reckoning.tick(at: start + .seconds(5) + .milliseconds(10))
        #expect(reckoning.now(at: start + .seconds(5) + .milliseconds(10)) == start + .milliseconds(110))
        #expect(during <= reckoning.now(at: start + .seconds(5) + .milliseconds(10)))
        // Afterwards, time counts again in full.
        reckoning.tick(at: start + .seconds(5) + .milliseconds(20))
        #expect(reckoning.now(at: start + .seconds(5) + .milliseconds(20)) == start + .milliseconds(120))
    }

    @Test("A wait for what never comes ends at its bound; one for what is signalled ends at the signal")
    func waitEnds() async {
        let signal = ChangeSignal()
        let flag = Locked(false)
        #expect(await RunTime.wait(for: .milliseconds(200), observing: { [signal] }) { false } == false)
        Task {
            flag.withLock { $0 = true }
            signal.signal()
        }
        #expect(await RunTime.wait(for: .seconds(30), observing: { [signal] }) { flag.withLock { $0 } })
    }
}
