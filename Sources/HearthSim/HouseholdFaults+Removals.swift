import Foundation

/// The removal fault's draws (docs/simulator.md, "What a run does"): who is removed, by whom,
/// whether a thief's copy goes on, who is away meanwhile, and whether it joins again.
extension HouseholdFaults {
    /// A removal drawn from the seed, or nil when the household is too small for one: at least
    /// three devices of the account (not removed, not the hostile member), one of them up to make
    /// it, so that two are left to agree.
    func drawRemoval() -> HouseholdRemovals.Removal? {
        let active = members.filter { !$0.hostile && $0.removal.withLock { $0 == nil } }
        guard active.count >= 3 else { return nil }
        let victim = active[draws.draw(below: active.count)]
        let removers = active.filter { $0 !== victim && $0.run.withLock { $0 != nil } }
        guard !removers.isEmpty else { return nil }
        let remover = removers[draws.draw(below: removers.count)]
        // One in two: a thief's copy goes on, with devices away from the remover's side meanwhile
        // (each other device with one chance in two), which meet only the thief until they come back.
        // (Drawn alike without them, so that `--thief` changes only what it adds.)
        let thief = draws.draw(below: 2) == 0 && settings.thief
        let away = active.filter { $0 !== victim && $0 !== remover && draws.draw(below: 2) == 0 }.map(\.index)
        let awayFor = draws.duration(60...600)
        // When the thief restores its copy again (and so forgets the record it learned meanwhile).
        let copyAgain = awayFor + draws.duration(30...600)
        // One in two: the owner joins the device again, with a new key, 5 to 30 minutes later.
        let rejoin = draws.draw(below: 2) == 0 ? draws.duration(300...1800) : nil
        return HouseholdRemovals.Removal(victim: victim, remover: remover, thief: thief, away: thief ? away : [], awayFor: awayFor,
                                 copyAgain: copyAgain, rejoinAfter: rejoin)
    }
}
