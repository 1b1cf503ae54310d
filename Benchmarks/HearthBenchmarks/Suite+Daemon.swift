import Foundation

// MARK: 8. The device daemon

extension Suite {
    /// Issue 13, point 8: two devices each run the real `hearth daemon` (the release build next
    /// to this binary; scripts/bench.sh builds both) with the other as static peer on loopback,
    /// and an app process on each device attaches to its daemon, as every app does by default
    /// when a daemon runs. Measured: the propagation app → daemon → daemon → app, and the
    /// attached app's `get`/`set` against `UserDefaults` in the same process.
    func daemon() throws {
        log("daemon: two devices running hearth daemon, an app attached to each")
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let hearth = URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("hearth").path
        guard FileManager.default.isExecutableFile(atPath: hearth) else {
            throw BenchError("no hearth binary at \(hearth) (scripts/bench.sh builds it)")
        }
        let ports = try (0..<2).map { _ in try Sockets.freePort() }
        let configs = [takeConfig(), takeConfig()]
        let data = (0..<2).map { "\(root)/daemon-data-\($0)" }
        // Each device its own runtime folder: its own daemon and attach sockets.
        let runtime = (0..<2).map { "\(root)/run-\($0)" }
        var children: [Child] = []
        defer { for child in children.reversed() { child.kill() } }
        for i in 0..<2 {
            guard mkdir(runtime[i], 0o700) == 0 else { throw BenchError("mkdir \(runtime[i]): \(String(cString: strerror(errno)))") }
            children.append(try Child(name: "daemon \(i)", arguments: [
                "daemon", "--config-dir", configs[i], "--data-dir", data[i], "--listen", "127.0.0.1", "--port", "\(ports[i])",
                "--peer", "127.0.0.1:\(ports[1 - i])", "--log-level", ProcessInfo.processInfo.environment["HEARTH_BENCH_LOG"] ?? "warning",
            ], environment: ["XDG_RUNTIME_DIR": runtime[i]], executable: hearth))
        }
        for i in 0..<2 { try waitForFile("\(runtime[i])/hearth/daemon.sock", who: "daemon \(i)") }

        // The propagation: the writer app on device 0, the receiver app on device 1.
        let apps = try (0..<2).map { i in
            try Child(name: "app \(i)", arguments: [
                "peer", "data=\(data[i])", "config=\(configs[i])", "port=0", "peers=", "store=com.example.daemon",
            ], environment: ["XDG_RUNTIME_DIR": runtime[i]])
        }
        children += apps
        for app in apps {
            try app.ask("", expect: "READY")
            let attached = try app.ask("attached", expect: "A")
            guard attached.first == "true" else { throw BenchError("\(app.name) did not attach to its daemon") }
        }
        // CPU per write (issue 27): user + system time of both daemons and both apps over the
        // measured writes, after a warm-up of its own (connections up, caches warm). The paced
        // loop's idle moments (heartbeats) count too, as they would for an app writing this way.
        _ = try measureLatency(writer: apps[0], receivers: [apps[1]], changes: 0)
        let processes = [("writer app", apps[0].pid), ("its daemon", children[0].pid), ("peer daemon", children[1].pid), ("receiver app", apps[1].pid)]
        let cpuBefore = processes.map { cpuMicroseconds(pid: $0.1) }
        let samples = try measureLatency(writer: apps[0], receivers: [apps[1]])[0]
        let writes = Double(warmup + changes)
        let cpuPerWrite = zip(processes.map { cpuMicroseconds(pid: $0.1) }, cpuBefore).map { Double($0 - $1) / writes }
        record("daemon app-daemon-daemon-app", 1, samples)
        for app in apps { app.quit() }

        // The attached app's local operations, against UserDefaults in the same process.
        let home = "\(root)/home-daemon"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let local = try Child(name: "local attached", arguments: [
            "local", "dir=\(data[0])", "config=\(configs[0])", "store=com.example.daemon-local", "seconds=\(quick ? 0.1 : 0.4)",
        ], environment: ["HOME": home, "XDG_CONFIG_HOME": "\(home)/.config", "XDG_RUNTIME_DIR": runtime[0]])
        children.append(local)
        let (opened, rates) = try localRates(local)
        guard opened == "attached" else { throw BenchError("the local child opened its store as \(opened), not attached to the daemon") }

        let s = Summary(samples)
        table.section("8. The device daemon (two devices on loopback, each running hearth daemon; apps attached to it)",
                      header: ["measure", "figure", "against", "ratio", "target", "verdict"])
        table.row(["propagation app → daemon → daemon → app, p50 (\(s.count) changes)", ms(s.p50), "", "", "≤ 1 ms", verdict(s.p50 / 1e6 <= 1)])
        table.row(["propagation app → daemon → daemon → app, p99", ms(s.p99), "", "", "≤ 5 ms", verdict(s.p99 / 1e6 <= 5)])
        table.row(["propagation app → daemon → daemon → app, max", ms(s.max), "", "", "—", ""])
        table.row(["CPU per write, user + system of the 2 daemons and 2 apps (\(Int(writes)) paced writes)",
                   String(format: "%.0f µs", cpuPerWrite.reduce(0, +)), "", "", "—", ""])
        table.row(["CPU per write by process: " + zip(processes, cpuPerWrite).map { "\($0.0.0) \(String(format: "%.0f", $0.1))" }.joined(separator: ", ") + " µs",
                   "", "", "", "—", ""])
        for (op, label) in [("set", "set"), ("get", "get")] {
            for (kind, kindLabel) in [("string", "small string"), ("data1k", "1 KB data"), ("dict100", "100-entry dictionary")] {
                // HEARTH_BENCH_LOCAL (profiling one operation) leaves the others out.
                guard let h = rates["hearth.\(op).\(kind)"], let d = rates["defaults.\(op).\(kind)"] else { continue }
                table.row(["attached app: \(label) \(kindLabel) (ops/s)", rate(h), "UserDefaults \(rate(d))",
                           String(format: "%.1f×", h / d), "≥ 10×", verdict(h / d >= 10)])
            }
        }
    }

    /// Waits up to 30 s for a path to exist (a daemon's socket).
    func waitForFile(_ path: String, who: String) throws {
        let deadline = monotonicNanoseconds() + 30_000_000_000
        while !FileManager.default.fileExists(atPath: path) {
            guard monotonicNanoseconds() < deadline else { throw BenchError("\(who): no \(path) after 30 s") }
            usleep(20_000)
        }
    }
}
