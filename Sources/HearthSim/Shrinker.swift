/// Shrinking a failing run (`--shrink`, docs/simulator.md "Shrinking"): a greedy search for a
/// smaller run of the same seed that still fails with the same invariant.
///
/// Each candidate is a replay of the seed with other settings, in this process: a run is decided
/// by its seed and settings (the executor is reset per run, as `--twice` relies on), so the search
/// needs no randomness of its own and gives the same result each time.
@MainActor
struct Shrinker {
    /// Runs the seed with these settings to its end.
    let run: (Household.Settings) -> Household.Outcome
    /// The command line that replays these settings (for the progress lines).
    let command: (Household.Settings) -> String
    /// Where the progress lines go.
    let say: (String) -> Void

    struct Result {
        let invariant: String
        let original: (settings: Household.Settings, outcome: Household.Outcome)
        let shrunk: (settings: Household.Settings, outcome: Household.Outcome)
        let candidates: Int
    }

    /// The fault kinds a flag switches off, each tried once a round, but not where it draws
    /// nothing anyway (`Household.fault()`: no crash after a write nor pair cut with
    /// `--clock-faults`, no pair cut of 2 devices): a full run to learn it changes nothing.
    /// The planted bug is never taken out: it is what fails.
    static let faultKinds: [(flag: String, setting: WritableKeyPath<Household.Settings, Bool>, inert: (Household.Settings) -> Bool)] = [
        ("--no-link-faults", \.linkFaults, { _ in false }),
        ("without --clock-faults", \.clockFaults, { _ in false }),
        ("without --hostile", \.hostile, { _ in false }),
        ("--no-crash-after-write", \.crashAfterWrite, { $0.clockFaults }),
        ("--no-pair-cuts", \.pairCuts, { $0.clockFaults || $0.devices <= 2 }),
        ("without --thief", \.thief, { $0.devices <= 2 }),
        ("without --removals", \.removals, { $0.thief || $0.devices <= 2 }),
        ("--no-account-switches", \.accountSwitches, { !AccountSwitches.switchesAccounts($0) }),
    ]

    /// The shrunk run, or nil when the original passes (nothing to shrink; its outcome is given).
    func shrink(_ original: Household.Settings, outcome first: Household.Outcome) -> Result? {
        // The first violation's invariant is the one a candidate must keep failing.
        guard let invariant = first.violations.first?.invariant else { return nil }
        var best = (settings: original, outcome: first)
        var ran = [command(original): first]
        var candidates = 0
        say("shrink: the original: \(command(original)): \(first.events) events, \(first.violations.count) violations; keeping \"\(invariant)\"")

        /// Runs a candidate; keeps it if it fails with the invariant and, when `mustDiffer`, is
        /// another run than the best so far (a flag that changes nothing only lengthens the command).
        @discardableResult
        func attempt(_ change: String, mustDiffer: Bool = true, _ edit: (inout Household.Settings) -> Void) -> Bool {
            var candidate = best.settings
            edit(&candidate)
            // A run is decided by its settings: one already run (an earlier round's) is not run again.
            let key = command(candidate)
            let outcome: Household.Outcome
            let cached = ran[key] != nil
            if let known = ran[key] {
                outcome = known
            } else {
                candidates += 1
                outcome = run(candidate)
                ran[key] = outcome
            }
            let fails = outcome.violations.contains { $0.invariant == invariant }
            let same = outcome.digest == best.outcome.digest
            let kept = fails && !(mustDiffer && same)
            let verdict = fails ? (kept ? "fails alike: kept" : "the same run: dropped")
                : outcome.violations.isEmpty ? "passes: dropped" : "fails otherwise (\(outcome.violations[0].invariant)): dropped"
            say("shrink: \(change): \(outcome.events) events, \(verdict)\(cached ? " (run before)" : "")")
            if kept { best = (candidate, outcome) }
            return kept
        }

        // The workload ends at the first violation: everything after it is noise.
        if !best.settings.failFast { attempt("--fail-fast") { $0.failFast = true } }
        // Rounds until nothing more is taken off: fewer devices change the whole run, after which
        // a fault kind or hours may go that could not before. Three rounds bound the cost.
        var passed: (settings: String, hundredths: Int)?
        for _ in 0..<3 {
            let before = command(best.settings)
            for kind in Self.faultKinds where best.settings[keyPath: kind.setting] && !kind.inert(best.settings) {
                attempt(kind.flag) { $0[keyPath: kind.setting] = false }
            }
            // Fewest first: the first that still fails is the smallest household found.
            for devices in 2..<max(2, best.settings.devices) {
                if attempt("--devices \(devices)", { $0.devices = devices }) { break }
            }
            // The simulated time, bisected in hundredths of an hour (36 s, and a short `--hours`):
            // a shorter run is a prefix of the workload (its draws come in time order), so the
            // failure usually shows from some point on. A length that passed with the other
            // settings as they are need not run again in the next round.
            var others = best.settings
            others.hours = 0
            let key = command(others)
            var passes = passed?.settings == key ? passed?.hundredths ?? 0 : 0
            var fails = Int((best.settings.hours * 100).rounded(.up))
            while fails - passes > 1 {
                let hundredths = (passes + fails) / 2
                // The same run with fewer hours is still a shorter command: kept.
                if attempt("--hours \(Double(hundredths) / 100)", mustDiffer: false, { $0.hours = Double(hundredths) / 100 }) {
                    fails = hundredths
                } else {
                    passes = hundredths
                }
            }
            passed = (key, passes)
            if command(best.settings) == before { break }
        }
        return Result(invariant: invariant, original: (original, first), shrunk: best, candidates: candidates)
    }
}
