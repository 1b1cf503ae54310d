import Foundation
import HearthCore

/// The faults of a run, drawn from the seed among the workload (docs/simulator.md, "What a run
/// does"): which kind, on which devices or link, for how long, and their end; the link faults
/// are in HouseholdFaults+LinkFaults.swift.
///
/// Its own type because what breaks and when is one concern, apart from running the devices
/// and the workload (``Household``): it draws from the household's stream (``Draws``) and acts on
/// the LAN and the devices' clocks; a crash it draws it hands back, the household powering its
/// devices.
final class HouseholdFaults: Sendable {
    let settings: Household.Settings
    let members: [Household.Member]
    let lan: SimulatedLAN
    let trace: Trace
    let executor: SimulationExecutor
    let checker: Checker
    let draws: Draws
    /// A crash drawn to follow the next write, this long after it: within the second its save
    /// waits (the write-behind), when its peers may have the write and its disk not yet.
    let crashAfterWrite = Locked<Duration?>(nil)

    init(settings: Household.Settings, members: [Household.Member], lan: SimulatedLAN, trace: Trace,
         executor: SimulationExecutor, checker: Checker, draws: Draws) {
        self.settings = settings
        self.members = members
        self.lan = lan
        self.trace = trace
        self.executor = executor
        self.checker = checker
        self.draws = draws
    }

    /// How many kinds of fault are drawn among: the first four (partitions, resets, crashes,
    /// clock faults), the link faults, removals, then account switches (each drawn after the kinds
    /// before, so that a run without them draws as before).
    var faultKinds: Int { Self.firstKinds + linkFaultKinds + removalFaultKinds + accountSwitchKinds }
    static let firstKinds = 4
    var linkFaultKinds: Int { settings.linkFaults ? LinkFault.allCases.count : 0 }
    var removalFaultKinds: Int { settings.removals ? 1 : 0 }

    /// One fault drawn from the seed. Returns the faults the household makes, which power and
    /// run its devices: a crash (the device, how long it stays down: ``Household/crash(_:)``), a
    /// removal (``HouseholdRemovals``) or an account switch (``AccountSwitches``).
    func fault() -> DrawnFault? {
        let kind = draws.draw(below: faultKinds)
        if kind >= Self.firstKinds + linkFaultKinds + removalFaultKinds { return accountSwitch() }
        if kind >= Self.firstKinds + linkFaultKinds { return drawRemoval().map(DrawnFault.removal) }
        if kind >= Self.firstKinds {
            inject(LinkFault.allCases[kind - Self.firstKinds])
            return nil
        }
        switch kind {
        case 3:
            // A device's clock is set right if it was off, else set off: by up to 10 minutes
            // either way (beyond the minute a peer may lead the clock, within the 12 h bound);
            // with --clock-faults by up to 11 hours either way, or (1 in 4) 13 to 20 hours ahead,
            // beyond the bound peers accept.
            let member = members[draws.draw(below: members.count)]
            let skew: Int64 = member.skew.withLock { $0 } != 0 ? 0
                : !settings.clockFaults ? Int64(draws.duration(-600...600).components.seconds * 1000)
                : draws.draw(below: 4) == 0 ? Int64(draws.duration(46_800...72_000).components.seconds * 1000)
                : Int64(draws.duration(-39_600...39_600).components.seconds * 1000)
            member.skew.withLock { $0 = skew }
            trace.log("d\(member.index) clock off by \(skew) ms")
            return nil
        // Not with --clock-faults, whose seeds stay as they were (findings 2, 3 and 5 replay).
        case 0 where settings.pairCuts && !settings.clockFaults && settings.devices > 2 && draws.draw(below: 2) == 0:
            // Two devices that cannot reach each other while both reach the others (out of
            // each other's radio range): what relaying is for. Healed after up to 10 minutes.
            let a = draws.draw(below: settings.devices)
            let b = (a + 1 + draws.draw(below: settings.devices - 1)) % settings.devices
            let lasting = draws.duration(10...600)
            trace.log("d\(a) and d\(b) cut off from each other for \(lasting)")
            let number = lan.cut(a, b)
            executor.after(lasting) { [lan, trace] in
                if lan.rejoin(number) { trace.log("d\(a) and d\(b) rejoined") }
            }
            return nil
        case 0:
            // Two sides, each with at least one device; healed after up to 10 minutes.
            let cut = 1 + draws.draw(below: settings.devices - 1)
            var order = Array(0..<settings.devices)
            for i in stride(from: order.count - 1, to: 0, by: -1) { order.swapAt(i, draws.draw(below: i + 1)) }
            var side = Array(repeating: 0, count: settings.devices)
            for device in order.prefix(cut) { side[device] = 1 }
            let lasting = draws.duration(10...600)
            trace.log("partition \(side.map(String.init).joined()) for \(lasting)")
            let number = lan.partition(side)
            executor.after(lasting) { [lan, trace] in
                if lan.heal(number) { trace.log("heal") }
            }
            return nil
        case 1:
            let links = lan.links
            guard !links.isEmpty else { return nil }
            let link = links[draws.draw(below: links.count)]
            trace.log("reset d\(link.local)->d\(link.remote)")
            lan.reset(link.id)
            return nil
        default:
            // One crash in two follows the next write, within its write-behind second (finding 1,
            // fixed; --no-crash-after-write leaves these out).
            if settings.crashAfterWrite, !settings.clockFaults, draws.draw(below: 2) == 0 {
                crashAfterWrite.withLock { $0 = draws.duration(0...1) }
                return nil
            }
            let up = members.filter { $0.run.withLock { $0 != nil } }
            guard up.count > 1 else { return nil }
            let member = up[draws.draw(below: up.count)]
            let down = draws.duration(5...300)
            return .crash(member, down: down)
        }
    }
}
