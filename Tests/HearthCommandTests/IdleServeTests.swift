import Foundation
import HearthTestSupport
import Testing

/// Issue 11, point 7: an idle `hearth serve` writes nothing to disk (no status file: `peers`
/// and `status` ask it over its control socket), and costs little CPU.
///
/// The measurement takes a minute; the suite is not serialized, so it runs beside the others.
@Suite struct IdleServeTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-idle-\(UUID().uuidString)").path

    /// User plus system CPU time of `pid` so far, in seconds (/proc/PID/stat, fields 14 and 15).
    static func cpuSeconds(_ pid: pid_t) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // The command name (field 2) is in parentheses and may hold spaces: count after it.
        let fields = try #require(stat.split(separator: ")").last).split(separator: " ")
        let ticks = try #require(Double(fields[11])) + #require(Double(fields[12]))
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test("Point 7: an idle hearth serve with one connected peer modifies no file under its data or config folder for 60 s",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"),
          .enabled(if: DiskWatch.inotifywait != nil, "inotifywait is not installed (scripts/setup.sh installs inotify-tools)"))
    func idleServeTouchesNoDisk() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (laptop, kitchen) = try await Device.household(root: root)
        _ = try await HearthCLI.run(["set", "backgroundColor", "2", "--wait", "0"] + laptop.store + laptop.directories)
        let serveA = try await HearthCLI.serve(laptop)
        let serveB = try await HearthCLI.serve(kitchen)
        defer { serveA.terminate(); serveB.terminate() }

        // Connected, and the first exchange over: the value is on the kitchen's disk and both sides
        // know the other has everything (what is saved after that is idle work).
        let kitchenID = try await kitchen.deviceID()
        var peers = ""
        let connected = try await eventually {
            peers = try await HearthCLI.run(["peers", "--json"] + laptop.store + laptop.directories).output
            let status = try await HearthCLI.run(["status", "--json"] + kitchen.directories).output
            return peers.contains("\"connectedPeers\":[\"\(kitchenID)\"]") && status.contains("\"keys\":1,")
                && status.contains("\"pending\":0,")
        }
        try #require(connected, "not connected: \(peers)")
        #expect(peers.contains("\"heldBy\":\(serveA.pid)"), "\(peers)")

        let watch = try DiskWatch(root)
        try await watch.waitUntilQuiet()

        let start = ContinuousClock.now
        let cpuBefore = try Self.cpuSeconds(serveA.pid)
        try await Task.sleep(for: .seconds(60))     // the measurement itself: a fixed minute of idling
        let cpuAfter = try Self.cpuSeconds(serveA.pid)
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let modified = watch.stop()
        #expect(modified.isEmpty, "an idle serve modified files:\n\(modified)")
        #expect(serveA.isRunning && serveB.isRunning)
        let stillConnected = try await HearthCLI.run(["peers", "--json"] + laptop.store + laptop.directories).output
        #expect(stillConnected.contains("\"connectedPeers\":[\"\(kitchenID)\"]"), "the peer went away: \(stillConnected)")
        let files = try FileManager.default.subpathsOfDirectory(atPath: root)
        #expect(!files.contains { $0.hasSuffix(".status.json") }, "\(files)")

        let percent = (cpuAfter - cpuBefore) / seconds * 100
        print(String(format: "idle hearth serve (one connected peer): %.3f s of CPU in %.1f s = %.3f %% of one core; files modified: %d (%d while settling)",
                     cpuAfter - cpuBefore, seconds, percent, modified.split(separator: "\n").count, watch.settling.split(separator: "\n").count))
    }
}
