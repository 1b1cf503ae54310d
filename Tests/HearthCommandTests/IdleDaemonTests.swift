import Foundation
import HearthTestSupport
import HearthTesting
import Testing

/// Issue 13, point 7: an idle daemon with two connected peers writes nothing to disk and wakes
/// rarely. The minute of idling runs beside the other suites.
@Suite struct IdleDaemonTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-idle-daemon-\(UUID().uuidString)").path
    /// Short runtime folders: a socket's path must fit in 108 bytes.
    let runtime = "/tmp/hrt-\(UUID().uuidString.prefix(8))"

    /// Voluntary context switches of each thread of `pid` so far, by thread ID: each is a
    /// thread going to sleep, so their growth over an idle period counts its wake-ups.
    static func wakeups(_ pid: pid_t) -> [String: Int] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return Dictionary(uniqueKeysWithValues: tasks.map { task in
            let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
            return (task, line.flatMap { Int($0.split(separator: "\t").last ?? "") } ?? 0)
        })
    }

    /// The wake-ups between two ``wakeups(_:)`` readings: the growth of each thread alive at the
    /// end (a thread that ended in between must not subtract its count, as a sum would).
    static func wakeups(from before: [String: Int], to after: [String: Int]) -> Int {
        after.reduce(0) { $0 + max(0, $1.value - (before[$1.key] ?? 0)) }
    }

    @Test("Point 7: a daemon with two connected peers modifies no file for 60 idle seconds; its wake-ups and CPU are reported",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"),
          .enabled(if: DiskWatch.inotifywait != nil, "inotifywait is not installed (scripts/setup.sh installs inotify-tools)"))
    func idleDaemonTouchesNoDisk() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let (laptop, kitchen) = try await Device.household(root: root)
        let phone = Device(name: "phone", root: root, port: try LoopbackCluster.freePort(), peerPort: laptop.port)
        let joined = try await HearthCLI.run(["account", "join", "\(root)/home.bundle", "--passphrase", "pw", "--device", "phone"] + phone.directories)
        try #require(joined.status == 0, "\(joined.error)")
        let devices = [laptop, kitchen, phone]
        let store = "com.example.colors"
        for device in devices {
            let set = try await HearthCLI.run(["set", "--store", store, "from-\(device.name)", "1", "--wait", "0"] + device.directories)
            try #require(set.status == 0, "\(set.error)")
        }
        var daemons: [ChildProcess] = []
        defer { for daemon in daemons { daemon.terminate() } }
        for device in devices {
            var environment = HearthCLI.environment
            try FileManager.default.createDirectory(atPath: "\(runtime)/\(device.name)", withIntermediateDirectories: true)
            environment["XDG_RUNTIME_DIR"] = "\(runtime)/\(device.name)"
            let peers = devices.filter { $0.name != device.name }.flatMap { ["--peer", "127.0.0.1:\($0.port)"] }
            let daemon = try ChildProcess(try #require(HearthCLI.binary), ["daemon", "--port", String(device.port)] + peers + device.directories,
                                          environment: environment)
            daemons.append(daemon)
            #expect(await daemon.waitForOutput("holding store \(store)", inErrors: true, upTo: .seconds(30)), "\(daemon.errorOutput)")
        }
        // Connected both ways, and the first exchanges over: every device holds the three keys.
        let converged = try await eventually(timeout: .seconds(120)) {
            for device in devices {
                let status = try await HearthCLI.run(["status", "--json"] + device.directories).output
                guard status.contains("\"keys\":3,"), status.contains("\"pending\":0,") else { return false }
            }
            return true
        }
        try #require(converged, "not converged: \(daemons.map(\.errorOutput))")

        let watch = try DiskWatch(root)
        try await watch.waitUntilQuiet()

        let daemon = daemons[0]
        let start = ContinuousClock.now
        let cpuBefore = try IdleServeTests.cpuSeconds(daemon.pid), wakeupsBefore = Self.wakeups(daemon.pid)
        try await Task.sleep(for: .seconds(60))     // the measurement itself: a fixed minute of idling
        let cpuAfter = try IdleServeTests.cpuSeconds(daemon.pid), wakeupsAfter = Self.wakeups(daemon.pid)
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let modified = watch.stop()
        #expect(modified.isEmpty, "an idle daemon modified files:\n\(modified)")
        let allRunning = daemons.allSatisfy { $0.isRunning }
        #expect(allRunning)
        let peers = try await HearthCLI.run(["peers", "--json", "--store", store] + laptop.directories).output
        #expect(peers.contains("\"heldBy\":\(daemon.pid)"), "\(peers)")
        #expect(peers.components(separatedBy: "\"connectedPeers\":[\"").count == 2 && peers.contains("\",\""),
                "not connected to both peers: \(peers)")
        print(String(format: "idle hearth daemon (two connected peers): %.3f s of CPU in %.1f s = %.3f %% of one core; %.1f wake-ups/s; files modified: %d (%d while settling)",
                     cpuAfter - cpuBefore, seconds, (cpuAfter - cpuBefore) / seconds * 100,
                     Double(Self.wakeups(from: wakeupsBefore, to: wakeupsAfter)) / seconds, modified.split(separator: "\n").count, watch.settling.split(separator: "\n").count))
    }
}
