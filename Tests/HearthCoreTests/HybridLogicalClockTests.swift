import HearthCore
import Testing

@Suite("Hybrid logical clock")
struct HybridLogicalClockTests {
    @Test("Ticks are strictly increasing even when the wall clock stands still or runs backwards")
    func monotonic() {
        var clock = HybridLogicalClock()
        var last = HLCTimestamp.zero
        for wall: UInt64 in [1000, 1000, 1000, 999, 500, 1001, 1001] {
            let t = clock.tick(wall: wall)
            #expect(t > last)
            last = t
        }
        #expect(last.milliseconds == 1001)
    }

    @Test("After observing a later remote timestamp, local ticks are later still")
    func observe() {
        var clock = HybridLogicalClock()
        _ = clock.tick(wall: 1000)
        let remote = HLCTimestamp(milliseconds: 5000, counter: 7)
        let result1 = clock.observe(remote, wall: 1000)
        #expect(result1)
        let next = clock.tick(wall: 1000)
        #expect(next > remote)
        #expect(next.milliseconds == 5000)
    }

    @Test("A remote timestamp beyond the drift bound is refused and does not move the clock")
    func driftBound() {
        var clock = HybridLogicalClock()
        let wall: UInt64 = 1_000_000_000
        _ = clock.tick(wall: wall)
        let before = clock.last
        let yearAhead = HLCTimestamp(milliseconds: wall + 365 * 86_400_000, counter: 0)
        let result2 = clock.observe(yearAhead, wall: wall)
        #expect(!result2)
        #expect(clock.last == before)
        let hourAhead = HLCTimestamp(milliseconds: wall + 3_600_000, counter: 0)
        let result3 = clock.observe(hourAhead, wall: wall)
        #expect(result3)
        #expect(clock.last == HLCTimestamp(milliseconds: wall + HybridLogicalClock.maximumLead, counter: 0))
    }

    @Test("Issue 26 point 4: a peer's stamps just under the drift bound move the clock at most a minute ahead, so a peer 3 s behind accepts every tick")
    func leadBound() {
        var clock = HybridLogicalClock()
        let start: UInt64 = 1_700_000_000_000
        // A member stamping 12 h − 100 ms ahead every 100 ms, for a minute.
        for step in UInt64(0)..<600 {
            let wall = start + step * 100
            let accepted = clock.observe(HLCTimestamp(milliseconds: wall + HybridLogicalClock.maximumDrift - 100, counter: 0), wall: wall)
            #expect(accepted)
            let tick = clock.tick(wall: wall)
            #expect(tick.milliseconds <= wall + HybridLogicalClock.maximumLead + 1)
            #expect(HybridLogicalClock.isAcceptable(tick, wall: wall - 3000), "tick \(tick.milliseconds - wall) ms ahead")
        }
        // Timestamps within the lead are followed as before: a write after them is later.
        var honest = HybridLogicalClock()
        let near = HLCTimestamp(milliseconds: start + 5000, counter: 3)
        honest.observe(near, wall: start)
        #expect(honest.tick(wall: start) > near)
    }

    @Test("The counter carries into the millisecond instead of wrapping")
    func counterOverflow() {
        var clock = HybridLogicalClock(last: HLCTimestamp(milliseconds: 10, counter: .max))
        let t = clock.tick(wall: 5)
        #expect(t.milliseconds == 11 && t.counter == 0)
    }
}
