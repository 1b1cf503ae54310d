import Foundation
import Testing

/// Shrinking a failing run (`hearth-sim --shrink`, docs/simulator.md "Shrinking"): the command it
/// ends with is a smaller run of the same seed that, replayed on its own, fails with the same
/// invariant. Serialized with the other simulator tests' reasons: each run keeps a core busy.
@Suite("Shrinking a failing run", .serialized)
struct ShrinkTests {
    /// The events figure of the `shrink: from …` or `shrink: to …` line.
    static func events(_ output: String, _ prefix: String) throws -> (command: String, events: Int) {
        let line = try #require(output.split(separator: "\n").first { $0.hasPrefix(prefix) }, "no \(prefix) line in\n\(output.suffix(3000))")
        let command = try #require(line.range(of: "scripts/sim.sh ")).lowerBound
        let fields = line[command...].components(separatedBy: ": ")
        let events = try #require(Int(fields[1].prefix { $0.isNumber }), "\(line)")
        return (String(fields[0]), events)
    }

    @Test("A planted bug's run shrinks to fewer events, and the shrunk command replayed alone fails with the same invariant and the same number of events")
    func plantedBugShrinks() async throws {
        let (status, output) = try await SimulatorTests.simulate(["--seed", "1", "--devices", "4", "--hours", "0.25", "--plant", "drop-remote-deletes", "--shrink"])
        #expect(status == 1, "\(output.suffix(3000))")
        #expect(output.contains("keeping \"deletes never come back\""), "\(output.suffix(3000))")
        let from = try Self.events(output, "shrink: the original: ")
        let to = try Self.events(output, "shrink: to ")
        #expect(to.events < from.events, "from \(from) to \(to)")
        #expect(output.contains("shrink: violation: deletes never come back: "), "\(output.suffix(3000))")
        // The shrunk run's trace is printed: its seed line follows its events.
        #expect(output.contains("workload over: "), "\(output.suffix(3000))")

        // The command it prints is the run it measured: replayed without --shrink, it fails alike.
        let arguments = to.command.split(separator: " ").dropFirst().map(String.init)
        let (replayStatus, replay) = try await SimulatorTests.simulate(arguments)
        #expect(replayStatus == 1, "\(replay.suffix(3000))")
        #expect(replay.contains("deletes never come back: "), "\(replay.suffix(3000))")
        #expect(replay.contains("seed 1: \(to.events) events, "), "\(to.command): \(replay.suffix(3000))")
    }

    @Test("A passing run has nothing to shrink: it says so and passes")
    func passingRunIsLeftAlone() async throws {
        let (status, output) = try await SimulatorTests.simulate(["--seed", "1", "--devices", "3", "--hours", "0.1", "--shrink"])
        #expect(status == 0, "\(output.suffix(3000))")
        #expect(output.contains("shrink: seed 1 passes every invariant: nothing to shrink"), "\(output)")
        let (line, _) = try SimulatorTests.summary(of: output)
        #expect(line.contains(", 0 violations, "), "\(line)")
    }
}
