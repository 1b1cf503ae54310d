import Foundation
import HearthSync

/// The link faults drawn among the household's faults (``Household/Settings/linkFaults``, on
/// by default; docs/simulator.md, "What a run does").
enum LinkFault: CaseIterable {
    /// A link stops delivering, both ways, for 5 s to 4 min (beyond the 90 s timeout at times),
    /// then delivers what it held, in order.
    case stall
    /// A link delivers 50 ms to 2 s late and at 1 to 64 KB per second, for 30 s to 10 min.
    case slow
    /// Two devices are cut and refused 2 to 6 times, 0.1 to 5 s each, 1 to 30 s apart.
    case flap
    /// One end of a link closes, the other does not see it (``LinkEndControl``).
    case halfOpen
}

extension HouseholdFaults {
    /// The longest a half-open link may live: the longest silence a session allows (two of its
    /// sparse ping intervals, each up to `maximumIdleFactor` heartbeat intervals: 8 min with the
    /// defaults), then at most one heartbeat tick of the engine (every `min(interval, timeout / 3)`).
    static var halfOpenBound: Duration {
        let options = SyncEngineOptions()
        return options.heartbeatInterval * (2 * SessionHeartbeat.maximumIdleFactor)
            + min(options.heartbeatInterval, options.timeout / 3)
    }

    /// One link fault, on a link up now (none when no link is up).
    func inject(_ fault: LinkFault) {
        let links = lan.links
        guard !links.isEmpty else { return }
        let link = links[draws.draw(below: links.count)]
        let pair = LinkFaults.Pair(link.local, link.remote)
        switch fault {
        case .stall:
            let lasting = draws.duration(5...240)
            trace.log("stall \(pair) for \(lasting)")
            lan.faults.stall(pair, until: executor.now + lasting)
            executor.after(lasting) { [trace] in trace.log("stall \(pair) over") }
        case .slow:
            let latency = draws.duration(0.05...2)
            // Log-uniform from 1 KB/s to 64 KB/s.
            let bytesPerSecond = Int(1024 * pow(64, draws.unit()))
            let lasting = draws.duration(30...600)
            trace.log("slow \(pair): \(latency) late, \(bytesPerSecond) bytes/s, for \(lasting)")
            lan.faults.slow(pair, .init(until: executor.now + lasting, latency: latency, bytesPerSecond: bytesPerSecond))
            executor.after(lasting) { [trace] in trace.log("slow \(pair) over") }
        case .flap:
            let steps = (0..<(2 + draws.draw(below: 5))).map { _ in (down: draws.duration(0.1...5), gap: draws.duration(1...30)) }
            trace.log("flap \(pair) \(steps.count) times")
            flap(pair, steps[...])
        case .halfOpen:
            guard lan.halfOpen(link.id) else { return }
            let started = executor.now
            trace.log("half-open d\(link.local)->d\(link.remote): d\(link.remote)'s end closes, d\(link.local)'s writes vanish")
            executor.after(Self.halfOpenBound + .seconds(1)) { [lan, checker, executor] in
                guard lan.isUp(link.id) else { return }
                checker.fail("half-open links are noticed",
                             "d\(link.local) still holds its link to d\(link.remote) \(executor.now - started) after d\(link.remote)'s end closed (bound \(Self.halfOpenBound))")
            }
        }
    }

    /// The flap's steps, one after another: cut and refused for `down`, then up for `gap`.
    private func flap(_ pair: LinkFaults.Pair, _ steps: ArraySlice<(down: Duration, gap: Duration)>) {
        guard let step = steps.first, lan.faults.block(pair, true) else { return }
        trace.log("flap \(pair) down for \(step.down)")
        lan.closeLinks(pair.low, pair.high)
        executor.after(step.down) { [self] in
            guard lan.faults.block(pair, false) else { return }
            trace.log("flap \(pair) up")
            executor.after(step.gap) { [self] in flap(pair, steps.dropFirst()) }
        }
    }
}
