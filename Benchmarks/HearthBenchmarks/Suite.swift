import Foundation
import HearthIdentity
import HearthTransport
import Logging

/// The whole suite: every figure of issue 7, measured in one run, printed as one table.
final class Suite {
    let quick: Bool
    let outputDirectory: String
    let root: String
    var table = Table()
    private var latencyRows: [String] = ["scenario,receiver,nanoseconds"]
    private var configs: [String] = []
    private var nextConfig = 0

    let only: Set<String>

    init(quick: Bool, outputDirectory: String, only: Set<String> = []) {
        self.quick = quick
        self.only = only
        self.outputDirectory = outputDirectory
        root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-bench-\(getpid())").path
    }

    /// How many changes each latency scenario measures (after a warm-up that is dropped).
    var changes: Int { quick ? 100 : 2000 }
    var warmup: Int { quick ? 10 : 50 }

    func run() async throws {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outputDirectory, withIntermediateDirectories: true)
        defer {
            Child.killAll()
            try? FileManager.default.removeItem(atPath: root)
        }
        let started = monotonicNanoseconds()
        try makeHousehold(devices: 24)
        log("household of 24 devices ready")

        // --only local,latency,throughput,join,crypto,daemon,scale: a part of the suite (for profiling).
        func wanted(_ part: String) -> Bool { only.isEmpty || only.contains(part) }
        if wanted("local") { try localOperations() }
        if wanted("latency") || wanted("throughput") {
            let floor = try await floors()
            try propagation(floor: floor, meshToo: wanted("latency"))
            try throughput()
        }
        if wanted("join") { try initialSyncReconnectFootprint(handshake: try await handshakeBytes()) }
        if wanted("crypto") { try cryptoCosts() }
        if wanted("daemon") { try daemon() }
        if wanted("scale") { try scale() }
        // Needs Avahi: only inside the test network (scripts/testnet/run.sh sets HEARTH_TESTNET).
        if only.contains("appear") { try appear() }

        table.note("suite ran in \(String(format: "%.0f", Double(monotonicNanoseconds() - started) / 1e9)) s"
                   + (quick ? " (--quick: fewer samples, figures indicative only)" : ""))
        let text = table.render()
        try text.write(toFile: "\(outputDirectory)/table.md", atomically: true, encoding: .utf8)
        try latencyRows.joined(separator: "\n").appending("\n")
            .write(toFile: "\(outputDirectory)/latency.csv", atomically: true, encoding: .utf8)
        log("wrote \(outputDirectory)/table.md and \(outputDirectory)/latency.csv")
        print(text)
    }

    func log(_ message: String) {
        FileHandle.standardError.write("[bench] \(message)\n".data(using: .utf8)!)
    }

    // MARK: Household

    /// One account, created on device 0 and joined by the others with a join bundle, each
    /// device with its own account directory (as separate machines would have).
    func makeHousehold(devices: Int) throws {
        var quiet = Logger(label: "hearth.identity")
        quiet.logLevel = .warning
        // Cheap scrypt for the CA key: setting up is not what is measured.
        let first = AccountStore(directory: URL(fileURLWithPath: "\(root)/config0"), logger: quiet, scrypt: .testing)
        let owner = try first.createAccount(displayName: "Bench household", passphrase: "bench", deviceName: "device-0")
        let bundle = try first.exportJoinBundle(owner.account.id)
        configs = ["\(root)/config0"]
        for i in 1..<devices {
            let accounts = AccountStore(directory: URL(fileURLWithPath: "\(root)/config\(i)"), logger: quiet, scrypt: .testing)
            _ = try accounts.importJoinBundle(bundle, passphrase: "bench", deviceName: "device-\(i)")
            configs.append("\(root)/config\(i)")
        }
    }

    /// A device's account directory not used by any other process yet.
    func takeConfig() -> String {
        defer { nextConfig += 1 }
        return configs[nextConfig]
    }

    // MARK: Peers

    /// Starts `count` peer processes of one store, linked as `links` says (each link is
    /// dialled by its first element), and waits until every link is up.
    func startPeers(_ name: String, count: Int, links: [(Int, Int)], store: String, stores: Int = 1,
                    configs: [String]? = nil) throws -> [Child] {
        let ports = try (0..<count).map { _ in try Sockets.freePort() }
        var children: [Child] = []
        lastPorts = ports
        lastConfigs = configs ?? (0..<count).map { _ in takeConfig() }
        for i in 0..<count {
            let peers = links.filter { $0.0 == i }.map { "127.0.0.1:\(ports[$0.1])" }
            children.append(try Child(name: "\(name) peer \(i)", arguments: [
                "peer", "data=\(root)/data-\(name)-\(i)", "config=\(lastConfigs[i])", "port=\(ports[i])",
                "peers=\(peers.joined(separator: ","))", "store=\(store)", "stores=\(stores)",
            ]))
        }
        for child in children { try child.ask("", expect: "READY") }
        let expected = (0..<count).map { i in links.filter { $0.0 == i || $0.1 == i }.count }
        try waitForPeers(children, expected)
        return children
    }

    /// The ports and account directories of the last `startPeers` call.
    var lastPorts: [Int] = []
    var lastConfigs: [String] = []

    func waitForPeers(_ children: [Child], _ expected: [Int], timeout: Double = 30) throws {
        let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
        while true {
            let counts = try children.map { Int(try $0.ask("peers", expect: "P")[0])! }
            if counts == expected { return }
            guard monotonicNanoseconds() < deadline else { throw BenchError("peers \(counts), expected \(expected)") }
            usleep(50_000)
        }
    }

    // MARK: 1. Local operations

    func localOperations() throws {
        log("local operations")
        let home = "\(root)/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let child = try Child(name: "local", arguments: ["local", "dir=\(root)/local", "seconds=\(quick ? 0.1 : 0.4)"],
                              environment: ["HOME": home, "XDG_CONFIG_HOME": "\(home)/.config"])
        defer { child.quit() }   // it exits by itself after DONE
        let rates = try localRates(child).rates
        table.section("1. Local operations (one process, ops/s, median of 3 runs)",
                      header: ["operation", "Hearth", "UserDefaults", "ratio", "target", "verdict"])
        for (op, label) in [("set", "set"), ("get", "get")] {
            for (kind, kindLabel) in [("string", "small string"), ("data1k", "1 KB data"), ("dict100", "100-entry dictionary")] {
                let h = rates["hearth.\(op).\(kind)"]!, d = rates["defaults.\(op).\(kind)"]!
                table.row(["\(label) \(kindLabel)", rate(h), rate(d), String(format: "%.1f×", h / d), "≥ 10×", verdict(h / d >= 10)])
            }
        }
        let d1 = rates["defaults.set.dict100"]!, d2 = rates["defaults.get.dict100"]!
        table.row(["setValue 100-entry dictionary (Swift API)", rate(rates["hearth.setValue.dict100"]!), rate(d1),
                   String(format: "%.1f×", rates["hearth.setValue.dict100"]! / d1), "—", ""])
        table.row(["value(forKey:) 100-entry dictionary (Swift API)", rate(rates["hearth.value.dict100"]!), rate(d2),
                   String(format: "%.1f×", rates["hearth.value.dict100"]! / d2), "—", ""])
    }

    /// The rates a `local` child prints, and how it opened its store ("host" or "attached").
    func localRates(_ child: Child) throws -> (opened: String, rates: [String: Double]) {
        var rates: [String: Double] = [:]
        var opened = ""
        while true {
            let line = try child.readLine(timeout: 120)
            let f = line.split(separator: " ")
            if f.first == "DONE" { break }
            if f.first == "OPENED", f.count == 2 { opened = String(f[1]); continue }
            guard f.first == "LOCAL", f.count == 3 else { throw BenchError("\(child.name): \(line)") }
            rates[String(f[1])] = Double(f[2])!
        }
        return (opened, rates)
    }

    // MARK: 2. Floor and propagation

    struct FloorFigures {
        let tcp: Summary
        let tls: Summary
        /// Sign and verify one entry (ns per call, this process).
        let sign: Double
        let verify: Double
        /// The physical floor of one change between two devices: half a TLS echo round trip
        /// (one way), one signature and one verification (ns).
        var change: Double { tls.p50 / 2 + sign + verify }
    }

    func floors() async throws -> FloorFigures {
        log("floor: TCP and TLS echo")
        let rounds = quick ? 500 : 5000
        let tcpSamples = try Floor.tcp(rounds: rounds, size: 64)
        let config = takeConfig()
        guard let identity = try AccountStore(directory: URL(fileURLWithPath: takeConfig()), logger: Logger(label: "hearth.bench")).loadCurrentIdentity() else {
            throw BenchError("no identity")
        }
        let echo = try Child(name: "tls echo", arguments: ["echo-tls", "config=\(config)"])
        defer { echo.kill() }
        let port = Int(try echo.ask("", expect: "READY")[0])!
        let tlsSamples = try await Floor.tls(rounds: rounds, size: 64, identity: identity, port: port)

        record("floor-tcp", 0, tcpSamples)
        record("floor-tls", 0, tlsSamples)
        let (sign, verify) = try CryptoCosts.signAndVerify(identity: identity, rounds: quick ? 200 : 2000)
        let floor = FloorFigures(tcp: Summary(tcpSamples), tls: Summary(tlsSamples), sign: sign, verify: verify)
        table.section("2. Propagation latency, set → didChangeExternallyNotification in another process (TLS, loopback)",
                      header: ["scenario", "samples", "p50", "p99", "max", "p50 / TLS echo p50", "p99 / TLS echo p50", "target", "verdict"])
        table.row(["floor: raw TCP echo round trip (64 B)", "\(floor.tcp.count)", ms(floor.tcp.p50), ms(floor.tcp.p99), ms(floor.tcp.max), "", "", "", ""])
        table.row(["floor: Hearth TLS echo round trip (64 B frame)", "\(floor.tls.count)", ms(floor.tls.p50), ms(floor.tls.p99), ms(floor.tls.max),
                   String(format: "%.1f× TCP", floor.tls.p50 / floor.tcp.p50), "", "", ""])
        table.row(["floor of one change: TLS echo p50 / 2 + sign (\(String(format: "%.0f", sign / 1e3)) µs) + verify (\(String(format: "%.0f", verify / 1e3)) µs)",
                   "", ms(floor.change), "", "", "", "", "", ""])
        return floor
    }

    /// The bytes of a TLS handshake alone between two devices of the account, for the
    /// reconnect figure: connect through a counting proxy to an echo child, close at once.
    func handshakeBytes() async throws -> Int {
        let config = takeConfig()
        guard let identity = try AccountStore(directory: URL(fileURLWithPath: takeConfig()), logger: Logger(label: "hearth.bench")).loadCurrentIdentity() else {
            throw BenchError("no identity")
        }
        let echo = try Child(name: "tls echo", arguments: ["echo-tls", "config=\(config)"])
        defer { echo.kill() }
        let proxy = try CountingProxy(target: Int(try echo.ask("", expect: "READY")[0])!)
        defer { proxy.stop() }
        for _ in 0..<3 {
            let connection = try await PeerTransportFactory.connect(identity: identity, port: proxy.port)
            await connection.close()
            usleep(100_000)
        }
        return Int(median(proxy.counts.map { Double($0.total) }))
    }

    func record(_ scenario: String, _ receiver: Int, _ samples: [Double]) {
        latencyRows += samples.map { "\(scenario),\(receiver),\(Int($0))" }
    }

    /// Paced changes: the writer sets one value, every receiver reports its arrival, then the
    /// next. Returns the samples per receiver, in nanoseconds.
    func measureLatency(writer: Child, receivers: [Child], changes: Int? = nil, key: String = "lat") throws -> [[Double]] {
        var samples = Array(repeating: [Double](), count: receivers.count)
        for i in 0..<(warmup + (changes ?? self.changes)) {
            let t0 = UInt64(try writer.ask("lat \(key)", expect: "S")[0])!
            for (r, receiver) in receivers.enumerated() {
                while true {
                    let f = try receiver.readLine(timeout: 30).split(separator: " ")
                    guard f.first == "L", f.count == 3 else { throw BenchError("\(receiver.name): \(f.joined(separator: " "))") }
                    // An older value (overtaken) would be a bug; only the current change counts.
                    guard UInt64(f[1])! == t0 else { continue }
                    if i >= warmup { samples[r].append(Double(UInt64(f[2])! - t0)) }
                    break
                }
            }
        }
        return samples
    }

    func propagation(floor: FloorFigures, meshToo: Bool) throws {
        func report(_ label: String, _ samples: [Double], target: (p50: Double?, p99: Double)) {
            let s = Summary(samples)
            let targetText = (target.p50.map { "p50 ≤ \(fmt($0)) ms, " } ?? "") + "p99 ≤ \(fmt(target.p99)) ms"
            let met = (target.p50.map { s.p50 / 1e6 <= $0 } ?? true) && s.p99 / 1e6 <= target.p99
            var miss = ""
            if !met {
                var parts: [String] = []
                if let p50 = target.p50, s.p50 / 1e6 > p50 { parts.append(String(format: "p50 %.1f×", s.p50 / 1e6 / p50)) }
                if s.p99 / 1e6 > target.p99 { parts.append(String(format: "p99 %.1f×", s.p99 / 1e6 / target.p99)) }
                miss = " (" + parts.joined(separator: ", ") + " over)"
            }
            table.row([label, "\(s.count)", ms(s.p50), ms(s.p99), ms(s.max),
                       String(format: "%.0f×", s.p50 / floor.tls.p50), String(format: "%.0f×", s.p99 / floor.tls.p50),
                       targetText, verdict(met) + miss])
        }

        log("propagation: 2 peers")
        let two = try startPeers("two", count: 2, links: [(1, 0)], store: "com.example.latency")
        let twoSamples = try measureLatency(writer: two[0], receivers: [two[1]])
        record("2 peers", 1, twoSamples[0])
        report("2 peers", twoSamples[0], target: (1.5 * floor.change / 1e6, 0.5))
        let twoSummary = Summary(twoSamples[0])
        table.row(["2 peers: p50 / floor of one change", "", String(format: "%.2f×", twoSummary.p50 / floor.change), "", "", "", "",
                   "≤ 1.5×", verdict(twoSummary.p50 <= 1.5 * floor.change)])
        // The same pair carries the throughput run.
        self.pair = two

        guard meshToo else { return }
        log("propagation: line A–B–C")
        let line = try startPeers("line", count: 3, links: [(1, 0), (2, 1)], store: "com.example.latency")
        _ = try measureLatency(writer: line[0], receivers: [line[1], line[2]], changes: 0)
        let lineBefore = try traffic(line)
        let lineSamples = try measureLatency(writer: line[0], receivers: [line[1], line[2]])
        let lineCost = try traffic(line).per(change: warmup + changes, since: lineBefore)
        for child in line { child.quit() }
        record("line of 3 at B", 1, lineSamples[0])
        record("line of 3 at C", 2, lineSamples[1])
        report("line A–B–C, at C (relayed by B)", lineSamples[1], target: (nil, 10))
        report("line A–B–C, at B (direct)", lineSamples[0], target: (nil, 10))

        log("propagation: 8 peers, full mesh")
        // HEARTH_BENCH_IDLE_AFTER / HEARTH_BENCH_IDLE_SECONDS: the idle window starts that long after
        // the last change and lasts that long (the steady state: links ping every 4 minutes from
        // 16 minutes of idling on, so `HEARTH_BENCH_IDLE_AFTER=1000 HEARTH_BENCH_IDLE_SECONDS=240`).
        let environment = ProcessInfo.processInfo.environment
        let idleAfter = environment["HEARTH_BENCH_IDLE_AFTER"].flatMap(Double.init) ?? 0
        let idleSeconds = environment["HEARTH_BENCH_IDLE_SECONDS"].flatMap(Double.init) ?? (quick ? 5 : 60)
        let mesh = try meshRun("mesh", devices: 8, changes: quick ? 100 : 1000, idleSeconds: idleSeconds, idleAfter: idleAfter)
        for (r, samples) in mesh.receivers.enumerated() { record("8 peers mesh", r + 1, samples) }
        report("8 peers full mesh, each of 7 receivers", mesh.receivers.flatMap { $0 }, target: (nil, 10))
        record("8 peers mesh last of 7", 0, mesh.last)
        report("8 peers full mesh, last of 7 receivers", mesh.last, target: (nil, 2))

        table.section("2c. What one change costs the household (all processes together, per change)",
                      header: ["scenario", "entries carried", "target", "verdict", "frame bytes sent", "CPU"])
        table.row(["line A–B–C", String(format: "%.2f", lineCost.entries), "2 (one per link)", verdict(lineCost.entries <= 2.05),
                   String(format: "%.0f B", lineCost.bytes), String(format: "%.0f µs", lineCost.cpu)])
        table.row(["8 peers full mesh", String(format: "%.2f", mesh.cost.entries), "≤ 1.5 × (N − 1) = 10.5",
                   verdict(mesh.cost.entries <= 10.5), String(format: "%.0f B", mesh.cost.bytes), String(format: "%.0f µs", mesh.cost.cpu)])
        if let idle = mesh.idle {
            let from = idleAfter > 0 ? String(format: ", from %.0f s", idleAfter) : ""
            table.section("6b. The 8-peer mesh idling for \(String(format: "%.0f", idle.seconds)) s\(from) after its last change (each of the 8 processes)",
                          header: ["figure", "mean", "max", "target", "verdict"])
            let meanWakeups = idle.wakeups.reduce(0, +) / Double(idle.wakeups.count), maxWakeups = idle.wakeups.max() ?? 0
            let meanCPU = idle.cpu.reduce(0, +) / Double(idle.cpu.count), maxCPU = idle.cpu.max() ?? 0
            table.row(["wake-ups per second (voluntary context switches, getrusage)", String(format: "%.2f", meanWakeups),
                       String(format: "%.2f", maxWakeups), "≤ 1", verdict(maxWakeups <= 1)])
            table.row(["of which the Swift runtime's own: an idle process that only started Swift concurrency and Dispatch, same window",
                       String(format: "%.2f", idle.baselineWakeups), "", "", ""])
            table.row(["so Hearth's own wake-ups per second (above the runtime's)", String(format: "%.2f", meanWakeups - idle.baselineWakeups),
                       String(format: "%.2f", maxWakeups - idle.baselineWakeups), "≤ 1", verdict(maxWakeups - idle.baselineWakeups <= 1)])
            table.row(["CPU, % of a core", String(format: "%.4f %%", meanCPU), String(format: "%.4f %%", maxCPU), "≤ 0.05 %", verdict(maxCPU <= 0.05)])
            table.row(["files written under the 8 data folders", "\(idle.filesWritten.count)", "", "0",
                       verdict(idle.filesWritten.isEmpty) + (idle.filesWritten.isEmpty ? "" : ": " + idle.filesWritten.prefix(3).joined(separator: ", "))])
        }
    }

    /// Traffic and CPU of a set of peer children, summed (`metrics` and `rusage`).
    struct Traffic {
        var entries = 0, bytes = 0
        var cpu: Int64 = 0

        /// Per change since `before`: entries sent, frame bytes sent, CPU µs.
        func per(change changes: Int, since before: Traffic) -> (entries: Double, bytes: Double, cpu: Double) {
            let n = Double(max(changes, 1))
            return (Double(entries - before.entries) / n, Double(bytes - before.bytes) / n, Double(cpu - before.cpu) / n)
        }
    }

    /// A peer child's frames sent by message type (`types`), or received (`rtypes`).
    func sentByType(_ child: Child, received: Bool = false) throws -> [String: (bytes: Int, messages: Int)] {
        var types: [String: (bytes: Int, messages: Int)] = [:]
        for field in try child.ask(received ? "rtypes" : "types", expect: "T") {
            let parts = field.split(separator: ":")
            guard parts.count == 3, let bytes = Int(parts[1]), let messages = Int(parts[2]) else { throw BenchError("types: \(field)") }
            types[String(parts[0])] = (bytes, messages)
        }
        return types
    }

    func traffic(_ children: [Child]) throws -> Traffic {
        var total = Traffic()
        for child in children {
            let m = try child.ask("metrics", expect: "M").map { Int($0)! }
            total.entries += m[2]
            total.bytes += m[0]
            total.cpu += Int64(try child.ask("rusage", expect: "R")[0])!
        }
        return total
    }

    /// One run of a full mesh of `devices` peer processes, each with `stores` stores open (the
    /// measured one and idle others): device 0 writes, the others receive. Its links and first
    /// deltas are made by a warm-up round before anything is counted.
    struct MeshRun {
        var receivers: [[Double]]
        /// Per change, the last receiver to hear of it.
        var last: [Double]
        var cost: (entries: Double, bytes: Double, cpu: Double)
        /// After the changes, if asked: each device's voluntary context switches per second and
        /// CPU share (% of a core) while the mesh idles, and the files of the devices' data
        /// folders modified meanwhile.
        var idle: (seconds: Double, wakeups: [Double], cpu: [Double], filesWritten: [String], baselineWakeups: Double)?
    }

    func meshRun(_ name: String, devices: Int, stores: Int = 1, changes: Int, configs: [String]? = nil,
                 idleSeconds: Double? = nil, idleAfter: Double = 0) throws -> MeshRun {
        let links = (0..<devices).flatMap { i in (0..<i).map { (i, $0) } }
        let mesh = try startPeers(name, count: devices, links: links, store: "com.example.latency", stores: stores, configs: configs)
        defer { for child in mesh { child.quit() } }
        _ = try measureLatency(writer: mesh[0], receivers: Array(mesh[1...]), changes: 0)
        let before = try traffic(mesh)
        let samples = try measureLatency(writer: mesh[0], receivers: Array(mesh[1...]), changes: changes)
        let cost = try traffic(mesh).per(change: warmup + changes, since: before)
        let last = (0..<samples[0].count).map { i in samples.map { $0[i] }.max()! }
        var run = MeshRun(receivers: samples, last: last, cost: cost)
        if let idleSeconds {
            // The runtime's own idle wake-ups, over the same window.
            let baseline = try Child(name: "baseline", arguments: ["baseline"])
            defer { baseline.quit() }
            try baseline.ask("", expect: "READY")
            // Past the write-behind (1 s) of the last change, so the window holds only idling.
            usleep(UInt32(2.5e6 + idleAfter * 1e6))
            let baseline0 = try baseline.ask("rusage", expect: "R").map { Int64($0)! }
            let folders = (0..<devices).map { "\(root)/data-\(name)-\($0)" }
            let filesBefore = modificationTimes(under: folders)
            let rusage0 = try mesh.map { try $0.ask("rusage", expect: "R").map { Int64($0)! } }
            usleep(UInt32(idleSeconds * 1e6))
            let rusage1 = try mesh.map { try $0.ask("rusage", expect: "R").map { Int64($0)! } }
            let baseline1 = try baseline.ask("rusage", expect: "R").map { Int64($0)! }
            let filesAfter = modificationTimes(under: folders)
            let written = filesAfter.filter { filesBefore[$0.key] != $0.value }.keys.sorted()
            let seconds = zip(rusage0, rusage1).map { Double($1[3] - $0[3]) / 1e9 }
            let wakeups = (0..<devices).map { Double(rusage1[$0][1] - rusage0[$0][1]) / seconds[$0] }
            let cpu = (0..<devices).map { Double(rusage1[$0][0] - rusage0[$0][0]) / 1e6 / seconds[$0] * 100 }
            run.idle = (seconds.max() ?? idleSeconds, wakeups, cpu, written,
                        Double(baseline1[1] - baseline0[1]) / (Double(baseline1[3] - baseline0[3]) / 1e9))
        }
        return run
    }

    /// Every regular file under `folders`, with its modification time.
    func modificationTimes(under folders: [String]) -> [String: Date] {
        var times: [String: Date] = [:]
        for folder in folders {
            guard let walker = FileManager.default.enumerator(atPath: folder) else { continue }
            for case let path as String in walker {
                let full = "\(folder)/\(path)"
                if let attributes = try? FileManager.default.attributesOfItem(atPath: full), attributes[.type] as? FileAttributeType == .typeRegular {
                    times[full] = attributes[.modificationDate] as? Date
                }
            }
        }
        return times
    }

    var pair: [Child] = []

    // MARK: 3. Throughput

    func throughput() throws {
        log("throughput")
        let (writer, receiver) = (pair[0], pair[1])
        defer { for child in pair { child.quit() } }
        let batch = 256
        try receiver.ask("tparm \(batch)", expect: "OK")
        let cpu0 = try [writer, receiver].map { Int64(try $0.ask("rusage", expect: "R")[0])! }
        let start = monotonicNanoseconds()
        var end = start
        var batches = 0
        repeat {
            batches += 1
            try writer.ask("tpbatch \(batches) \(batch)", expect: "W")
            end = UInt64(try receiver.ask("", expect: "TB", timeout: 60)[0])!
        } while Double(end - start) < (quick ? 0.5e9 : 4e9)
        let cpu1 = try [writer, receiver].map { Int64(try $0.ask("rusage", expect: "R")[0])! }
        let updates = Double(batches * batch)
        let seconds = Double(end - start) / 1e9
        let writerCPU = Double(cpu1[0] - cpu0[0]) / updates, receiverCPU = Double(cpu1[1] - cpu0[1]) / updates

        // An unpaced burst: the writer sets as fast as it can; later writes supersede earlier
        // ones still queued, so fewer entries than writes travel.
        let burst = quick ? 5_000 : 50_000
        let m0 = try receiver.ask("metrics", expect: "M")
        let w = try writer.ask("burst \(burst) \(batch)", expect: "W", timeout: 120)
        let burstStart = UInt64(w[0])!, burstEnd = UInt64(w[1])!
        let done = UInt64(try receiver.ask("", expect: "BD", timeout: 300)[0])!
        let m1 = try receiver.ask("metrics", expect: "M")
        let entries = Int(m1[3])! - Int(m0[3])!

        table.section("3. Throughput, one peer pushing to another",
                      header: ["figure", "value", "detail", "detail"])
        table.row(["sustained: batches of \(batch) distinct keys, each delivered before the next",
                   String(format: "%.0f updates/s", updates / seconds), "\(Int(updates)) updates in \(String(format: "%.2f", seconds)) s", "", "", "", "", "", ""])
        table.row(["CPU per update (getrusage)", String(format: "%.1f µs writer", writerCPU),
                   String(format: "%.1f µs receiver", receiverCPU), String(format: "%.1f µs both", writerCPU + receiverCPU), "", "", "", "", ""])
        table.row(["unpaced burst: \(burst) sets over \(batch) keys", String(format: "%.0f sets/s at the writer", Double(burst) / (Double(burstEnd - burstStart) / 1e9)),
                   String(format: "converged %.0f ms after the first set", Double(done - burstStart) / 1e6),
                   "\(entries) entries carried", "", "", "", "", ""])
    }

    // MARK: 4-6. Initial sync, reconnect, footprint, open

    func initialSyncReconnectFootprint(handshake: Int) throws {
        log("initial sync: filling a store")
        let store = "com.example.full"
        // A full store whose entries are signed: A is filled, then synced to B (which makes A
        // sign everything), as a household store that has been in use would be.
        let filled = try startPeers("full", count: 2, links: [(1, 0)], store: store)
        let (a, b) = (filled[0], filled[1])
        let size = 1000   // 8-byte key + 5 bytes of data header + 1000: 1,013 B a key, 1,037,312 B in all
        let fill = try a.ask("fill 1024 \(size)", expect: "F", timeout: 120)
        let payload = Int(fill[0])!
        guard try a.ask("synced 1", expect: "Y", timeout: 60)[0] == "1" else { throw BenchError("B did not sync the full store") }
        b.quit()
        let aPort = lastPorts[0], aConfig = lastConfigs[0]

        // Three new devices join one after the other (each with an empty store of its own);
        // the last one stays for the reconnect and footprint figures.
        let joins = quick ? 1 : 3
        var initialTimes: [Double] = []
        var c: Child!
        var proxy: CountingProxy!
        var initialKeys = 0, joinFrames = 0, joinWire = 0
        for j in 0..<joins {
            log("initial sync: new device \(j + 1) of \(joins) joins")
            if let c { c.quit() }
            proxy?.stop()
            proxy = try CountingProxy(target: aPort)
            c = try Child(name: "joiner \(j)", arguments: [
                "peer", "data=\(root)/data-joiner-\(j)", "config=\(takeConfig())", "port=\(try Sockets.freePort())",
                "peers=127.0.0.1:\(proxy.port)", "store=\(store)",
            ])
            // The first download may come as several deltas (each about a megabyte), each posting
            // initialSyncChange: it is over when every key has arrived.
            var initKeys = 0, initOpened: UInt64 = 0, initEnd: UInt64 = 0
            var ready = false
            while initKeys < 1024 || !ready {
                let f = try c.readLine(timeout: 60).split(separator: " ")
                if f.first == "READY" { ready = true } else if f.first == "INIT" {
                    initOpened = UInt64(f[1])!
                    initEnd = UInt64(f[2])!
                    initKeys += Int(f[3])!
                } else { throw BenchError("joiner: \(f.joined(separator: " "))") }
            }
            initialTimes.append(Double(initEnd - initOpened) / 1e6)
            initialKeys = initKeys
            // Let the acknowledgements cross before counting.
            guard try c.ask("synced 1", expect: "Y", timeout: 30)[0] == "1" else { throw BenchError("joiner not settled") }
            usleep(200_000)
            let joinMetrics = try c.ask("metrics", expect: "M").map { Int($0)! }
            joinFrames = joinMetrics[0] + joinMetrics[1]
            joinWire = proxy.counts.first?.total ?? -1
        }
        defer { c.quit(); proxy.stop() }
        let initialMs = median(initialTimes)

        /// Disconnects C, lets A change one key (or none), reconnects, and counts that
        /// connection: (frame bytes both ways, socket bytes both ways, entries C received,
        /// frames by message type both ways).
        func reconnect(changing key: Int?) throws -> (frames: Int, wire: Int, entries: Int, types: [String: (bytes: Int, messages: Int)]) {
            try c.ask("stop", expect: "OK")
            // C's one connection is to A: what C sent and received, by type, is the connection's.
            func byType() throws -> [[String: (bytes: Int, messages: Int)]] { [try sentByType(c), try sentByType(c, received: true)] }
            let typesBefore = try byType()
            if let key { try a.ask("change \(key) \(size)", expect: "OK") }
            let connectionsBefore = proxy.counts.count
            try c.ask("resume", expect: "OK")
            let deadline = monotonicNanoseconds() + 30_000_000_000
            var m: [Int] = []
            repeat {
                usleep(20_000)
                m = try c.ask("metrics", expect: "M").map { Int($0)! }
            } while (m[4] < 1 || (key != nil && m[3] < 1)) && monotonicNanoseconds() < deadline
            guard try c.ask("synced 1", expect: "Y", timeout: 30)[0] == "1" else { throw BenchError("joiner not settled after reconnect") }
            usleep(300_000)   // the last acknowledgement crosses
            m = try c.ask("metrics", expect: "M").map { Int($0)! }
            let counts = proxy.counts
            guard counts.count == connectionsBefore + 1 else { throw BenchError("expected one new connection, saw \(counts.count - connectionsBefore)") }
            var types: [String: (bytes: Int, messages: Int)] = [:]
            for (before, after) in zip(typesBefore, try byType()) {
                for (type, tally) in after {
                    let old = before[type] ?? (0, 0)
                    let sum = types[type] ?? (0, 0)
                    if tally.messages > old.messages { types[type] = (sum.bytes + tally.bytes - old.bytes, sum.messages + tally.messages - old.messages) }
                }
            }
            return (m[0] + m[1], counts.last!.total, m[3], types)
        }
        log("reconnect with nothing changed")
        let unchanged = try reconnect(changing: nil)
        log("reconnect after one change")
        let changed = try reconnect(changing: 17)
        let reconnectFrames = changed.frames, reconnectWire = changed.wire

        // Propagation between two devices that hold the full store: does the store's size
        // show in the latency? (An existing key: the store is at its 1,024-key quota.)
        log("propagation on the full store")
        try c.ask("watch key-0000", expect: "OK")
        let fullSamples = try measureLatency(writer: a, receivers: [c], changes: quick ? 100 : 1000, key: "key-0000")[0]
        record("2 peers full store", 1, fullSamples)
        let full = Summary(fullSamples)

        table.section("2b. Propagation latency between two devices holding the full store (1,024 keys, ~1 MB)",
                      header: ["scenario", "samples", "p50", "p99", "max", "target", "verdict"])
        table.row(["2 peers, full store", "\(full.count)", ms(full.p50), ms(full.p99), ms(full.max), "p50 ≤ 1 ms, p99 ≤ 5 ms",
                   verdict(full.p50 <= 1e6 && full.p99 <= 5e6)])

        table.section("4. Initial sync: a new device joins a full store (1,024 keys)",
                      header: ["figure", "value", "target", "verdict"])
        table.row(["time from opening the store to initialSyncChange (median of \(initialTimes.count): "
                   + initialTimes.map { String(format: "%.0f", $0) }.joined(separator: ", ") + " ms)",
                   String(format: "%.1f ms", initialMs), "≤ 250 ms",
                   verdict(initialMs <= 250) + (initialMs > 250 ? String(format: " (%.1f× over)", initialMs / 250) : ""), "", "", "", "", ""])
        table.row(["keys in the notification / payload (keys + values, quota bytes)", "\(initialKeys) keys / \(payload) B", "", "", "", "", "", "", ""])
        table.row(["frame bytes both ways (syncMetrics, no TLS) / payload", "\(joinFrames) B = " + String(format: "%.3f×", Double(joinFrames) / Double(payload)),
                   "≤ 1.3×", verdict(Double(joinFrames) / Double(payload) <= 1.3), "", "", "", "", ""])
        table.row(["socket bytes both ways (proxy, TLS and handshake included) / payload",
                   "\(joinWire) B = " + String(format: "%.3f×", Double(joinWire) / Double(payload)),
                   "≤ 1.3×", verdict(Double(joinWire) / Double(payload) <= 1.3), "", "", "", "", ""])

        table.section("5. Reconnect after one of 1,024 keys changed during a disconnect",
                      header: ["figure", "value", "target", "verdict"])
        table.row(["TLS handshake alone (proxy; incl. close_notify both ways)", "\(handshake) B", "", "", "", "", "", "", ""])
        table.row(["socket bytes of the reconnection (proxy, both ways)", "\(reconnectWire) B", "", "", "", "", "", "", ""])
        table.row(["beyond the handshake (socket bytes − handshake)", "\(reconnectWire - handshake) B", "≤ 2048 B",
                   verdict(reconnectWire - handshake <= 2048) + (reconnectWire - handshake > 2048 ? String(format: " (%.1f× over)", Double(reconnectWire - handshake) / 2048) : ""),
                   "", "", "", "", ""])
        table.row(["of which the changed entry's key and value (quota bytes)", "\(8 + 5 + size) B", "", ""])
        // Every delta carries the DER certificate of each signer of its entries (docs/protocol.md).
        let certificate = try AccountStore(directory: URL(fileURLWithPath: aConfig), logger: Logger(label: "hearth.bench")).loadCurrentIdentity()?.certificate.derEncoded.count ?? -1
        table.row(["size of a device certificate (DER), which a delta carries once per connection for signers other than the sender",
                   "\(certificate) B", "", ""])
        table.row(["frame bytes of the reconnection (syncMetrics, no TLS)", "\(reconnectFrames) B (\(changed.entries) entry received)", "", ""])
        table.row(["for comparison, a reconnection with nothing changed: socket bytes beyond the handshake / frame bytes",
                   "\(unchanged.wire - handshake) B / \(unchanged.frames) B", "", ""])
        table.row(["so the one changed entry cost (socket bytes, changed − unchanged)", "\(changed.wire - unchanged.wire) B", "", ""])
        for (label, run) in [("after one change", changed), ("with nothing changed", unchanged)] {
            let parts = run.types.sorted { $0.value.bytes > $1.value.bytes }
                .map { "\($0.key) \($0.value.bytes) B (\($0.value.messages))" }.joined(separator: ", ")
            table.row(["frame bytes by message type, both ways, \(label)", parts, "", ""])
        }

        try footprint(a: a, c: c, store: store, aConfig: aConfig)
    }

    func footprint(a: Child, c: Child, store: String, aConfig: String) throws {
        log("footprint: 10 idle seconds")
        // A signed-out store (an account directory with no account) for comparison: it only
        // polls the account directory.
        let local = try Child(name: "signed-out", arguments: [
            "peer", "data=\(root)/data-signed-out", "config=\(root)/config-empty", "port=0", "peers=", "store=\(store)",
        ])
        try local.ask("", expect: "READY")
        // Past the write-behind (1 s) of the last change, so the window holds only idling.
        usleep(2_500_000)
        let idle = quick ? 3.0 : 10.0
        let children = [a, c, local]
        let before = try children.map { try $0.ask("rusage", expect: "R").map { Int64($0)! } }
        usleep(UInt32(idle * 1e6))
        let after = try children.map { try $0.ask("rusage", expect: "R").map { Int64($0)! } }
        let rss = try children.map { try $0.ask("rss", expect: "RSS").map { Int($0)! } }
        table.section("6. Footprint", header: ["figure", "value", "target", "verdict", "detail"])
        for (i, label) in ["A: full store, syncing with 1 peer", "C: joined full store, syncing with 1 peer", "signed-out store (no sync)"].enumerated() {
            let seconds = Double(after[i][3] - before[i][3]) / 1e9
            let percent = Double(after[i][0] - before[i][0]) / 1e6 / seconds * 100
            let wakeups = after[i][1] - before[i][1]
            table.row(["idle CPU, \(label)", String(format: "%.3f %% of a core", percent),
                       "≤ 0.5 %", verdict(percent <= 0.5) + (percent > 0.5 ? String(format: " (%.1f× over)", percent / 0.5) : ""),
                       String(format: "%.0f ms CPU in %.1f s, %lld voluntary context switches", Double(after[i][0] - before[i][0]) / 1e3, seconds, wakeups),
                       "", "", "", ""])
        }
        for (i, label) in ["A: full store, syncing", "C: joined full store, syncing", "signed-out store (no sync)"].enumerated() {
            let mb = Double(rss[i][0]) / 1024
            table.row(["RSS (VmRSS), \(label)", String(format: "%.1f MB", mb), i < 2 ? "≤ 40 MB" : "",
                       i < 2 ? verdict(mb <= 40) + (mb > 40 ? String(format: " (%.1f× over)", mb / 40) : "") : "",
                       String(format: "peak %.1f MB, %d threads", Double(rss[i][1]) / 1024, rss[i][2]), "", "", "", ""])
        }
        local.quit()
        a.quit()

        log("opening the full store from disk")
        var opens: [Double] = []
        var keys = 0
        for _ in 0..<(quick ? 3 : 7) {
            let child = try Child(name: "open", arguments: ["open", "data=\(root)/data-full-0", "config=\(aConfig)", "store=\(store)"])
            let f = try child.ask("", expect: "OPEN", timeout: 30)
            opens.append(Double(f[0])! / 1e6)
            keys = Int(f[1])!
            child.kill()
        }
        let open = median(opens)
        table.row(["open a full store from disk (new process, init → first read; median of \(opens.count))",
                   String(format: "%.1f ms", open), "≤ 50 ms", verdict(open <= 50) + (open > 50 ? String(format: " (%.1f× over)", open / 50) : ""),
                   "\(keys) keys; min " + String(format: "%.1f", opens.min()!) + " ms, max " + String(format: "%.1f", opens.max()!) + " ms",
                   "", "", "", ""])
    }

    // MARK: 10. A device appears

    /// From a new device's process start to its first applied delta, finding its peer by mDNS:
    /// device A holds a value and publishes itself; a new device B (a fresh data folder, each
    /// time another device of the household) starts, browses, resolves, dials, and receives.
    func appear() throws {
        log("a device appears: mDNS (Avahi) to the first applied delta")
        let store = "com.example.appear"
        let a = try Child(name: "appear A", arguments: ["peer", "data=\(root)/data-appear-a", "config=\(configs[0])", "port=0",
                                                        "peers=", "discovery=avahi", "store=\(store)"])
        defer { a.quit() }
        try a.ask("", expect: "READY")
        try a.ask("change 1 100", expect: "OK")
        usleep(1_000_000)   // A's service is published and announced before anyone looks
        var samples: [Double] = []
        for i in 0..<(quick ? 5 : 20) {
            let start = monotonicNanoseconds()
            let b = try Child(name: "appear B\(i)", arguments: ["peer", "data=\(root)/data-appear-b\(i)", "config=\(configs[1 + i % 20])",
                                                                 "port=0", "peers=", "discovery=avahi", "store=\(store)"])
            var arrived: UInt64?
            var ready = false
            while arrived == nil || !ready {
                let f = try b.readLine(timeout: 60).split(separator: " ")
                if f.first == "READY" { ready = true } else if f.first == "INIT" { arrived = UInt64(f[2])! } else {
                    throw BenchError("appear: \(f.joined(separator: " "))")
                }
            }
            samples.append(Double(arrived! - start))
            b.quit()
        }
        record("appear", 0, samples)
        let s = Summary(samples)
        table.section("10. A device appears on the LAN: its process starts → its first delta applied (mDNS via Avahi, test network)",
                      header: ["samples", "p50", "p99", "max", "target", "verdict"])
        table.row(["\(s.count)", ms(s.p50), ms(s.p99), ms(s.max), "p50 ≤ 1 s", verdict(s.p50 <= 1e9)])
    }

    // MARK: 9. Scale

    /// The scale curve: a full mesh of 2, 4, 8 and 16 devices with one store each, and of 4
    /// devices with 1, 10 and 20 stores each (the measured one written, the others open and
    /// idle). Per change: the last receiver's latency, and the entries, frame bytes and CPU of
    /// every process together. Written to scale.csv, which scripts/plot-scale.py plots.
    func scale() throws {
        let changes = quick ? 50 : 300
        var rows = ["curve,devices,stores,p50_ns,p99_ns,entries_per_change,bytes_per_change,cpu_us_per_change"]
        table.section("9. Scale: a full mesh of N devices, device 0 writing (\(changes) paced changes per point; all processes together, per change)",
                      header: ["devices", "stores per device", "last receiver p50", "last receiver p99", "entries carried", "N − 1",
                               "frame bytes sent", "CPU", "CPU / (N − 1)"])
        func point(devices: Int, stores: Int, curves: [String]) throws {
            log("scale: \(devices) devices, \(stores) store\(stores == 1 ? "" : "s") each")
            // Every process of the earlier sections has quit: their account directories are free.
            let run = try meshRun("scale-\(devices)-\(stores)", devices: devices, stores: stores, changes: changes,
                                  configs: Array(configs.prefix(devices)))
            let s = Summary(run.last)
            for curve in curves {
                rows.append("\(curve),\(devices),\(stores),\(Int(s.p50)),\(Int(s.p99)),\(run.cost.entries),\(run.cost.bytes),\(run.cost.cpu)")
            }
            table.row(["\(devices)", "\(stores)", ms(s.p50), ms(s.p99), String(format: "%.2f", run.cost.entries), "\(devices - 1)",
                       String(format: "%.0f B", run.cost.bytes), String(format: "%.0f µs", run.cost.cpu),
                       String(format: "%.0f µs", run.cost.cpu / Double(devices - 1))])
        }
        for devices in [2, 4, 8, 16] { try point(devices: devices, stores: 1, curves: devices == 4 ? ["devices", "stores"] : ["devices"]) }
        for stores in [10, 20] { try point(devices: 4, stores: stores, curves: ["stores"]) }
        try rows.joined(separator: "\n").appending("\n").write(toFile: "\(outputDirectory)/scale.csv", atomically: true, encoding: .utf8)
    }

    // MARK: 7. Crypto per call

    func cryptoCosts() throws {
        log("cost of each cryptographic step")
        guard let identity = try AccountStore(directory: URL(fileURLWithPath: configs[0]), logger: Logger(label: "hearth.bench")).loadCurrentIdentity() else {
            throw BenchError("no identity")
        }
        table.section("7. Cost of each cryptographic step of the sync path (this process, µs per call, median of 5 runs)",
                      header: ["step", "µs per call"])
        for (step, microseconds) in try CryptoCosts.measure(identity: identity, quick: quick) {
            table.row([step, String(format: "%.1f", microseconds)])
        }
    }

    // MARK: Formatting

    func rate(_ value: Double) -> String {
        value >= 1e6 ? String(format: "%.2f M/s", value / 1e6) : value >= 1e3 ? String(format: "%.1f k/s", value / 1e3) : String(format: "%.0f /s", value)
    }
    func ms(_ nanoseconds: Double) -> String { String(format: "%.3f ms", nanoseconds / 1e6) }
    func fmt(_ value: Double) -> String { value == value.rounded() ? String(format: "%.0f", value) : String(format: "%.1f", value) }
    func verdict(_ met: Bool) -> String { met ? "met" : "MISSED" }
}

/// The report: sections of Markdown tables and notes.
struct Table {
    private var lines: [String] = []
    private var columns = 0

    mutating func section(_ title: String, header: [String]) {
        // Trailing empty header cells are dropped, and rows are cut to match.
        let header = Array(header.reversed().drop(while: \.isEmpty).reversed())
        columns = header.count
        lines += ["", "### \(title)", "", "| " + header.joined(separator: " | ") + " |",
                  "|" + Array(repeating: " --- |", count: columns).joined()]
    }

    mutating func row(_ cells: [String]) {
        var cells = Array(cells.prefix(columns))
        while cells.count < columns { cells.append("") }
        lines.append("| " + cells.joined(separator: " | ") + " |")
    }

    mutating func note(_ text: String) { lines += ["", text] }

    func render() -> String { lines.joined(separator: "\n") + "\n" }
}

enum PeerTransportFactory {
    static func connect(identity: DeviceIdentity, port: Int) async throws -> PeerConnection {
        try await PeerTransport(identity: identity, logger: Logger(label: "hearth.bench")).connect(host: "127.0.0.1", port: port)
    }
}
