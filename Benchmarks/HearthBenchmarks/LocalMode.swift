import Foundation
import Hearth
import Logging

/// `hearth-benchmarks local dir=… seconds=…`: set and get rates of Hearth and of
/// Foundation's UserDefaults, side by side in one process. Run as a child whose HOME and
/// XDG_CONFIG_HOME point into a temporary folder, so UserDefaults writes nothing of the user's.
enum LocalMode {
    static func run(_ arguments: [String: String]) throws {
        let out = LineWriter(fd: 1)
        let seconds = Double(arguments["seconds"] ?? "0.4") ?? 0.4
        var logger = Logger(label: "hearth")
        logger.logLevel = .warning
        // Write-behind on (1 s), as an app has it; signing is not involved (signed out).
        // With config=DIR the store is the signed-in account's, as an app opens it by default:
        // where a device daemon runs (the daemon section), it holds the store and this process
        // attaches to it, so the figures are those of an attached app.
        let sync = arguments["config"].map { SyncSettings(accountDirectory: $0, discovery: .none, listenHost: "127.0.0.1") } ?? .disabled
        let store = try UbiquitousKeyValueStore(storeIdentifier: arguments["store"] ?? "com.example.local",
                                                configuration: .init(dataDirectory: arguments["dir"]!, sync: sync, logger: logger))
        out.send("OPENED \(store.internals.isAttached ? "attached" : "host")")
        let suite = "hearth-bench-\(getpid())"
        guard let defaults = UserDefaults(suiteName: suite) else { throw BenchError("no UserDefaults suite") }
        defer { defaults.removePersistentDomain(forName: suite) }

        // Two values of each kind, alternated, so every set really changes the value.
        let strings = ["hello, hearth", "hello, world!"]
        let datas = [randomData(1024), randomData(1024)]
        let dictionaries: [[String: Any]] = (0..<2).map { v in
            Dictionary(uniqueKeysWithValues: (0..<100).map { ("field-\($0)", "value-\($0)-\(v)" as Any) })
        }
        let plists = try dictionaries.map { try PropertyListValue(foundation: $0) }

        var sink = 0   // results are counted, so no read is optimised away
        // HEARTH_BENCH_LOCAL=name: only that measurement (to profile one operation alone).
        let selected = ProcessInfo.processInfo.environment["HEARTH_BENCH_LOCAL"]
        func rate(_ name: String, _ body: (Int) -> Void) {
            if let selected, !name.contains(selected) { return }
            // Three timed runs of at least `seconds`; the median rate is reported.
            var rates: [Double] = []
            for _ in 0..<3 {
                var n = 0
                let start = monotonicNanoseconds()
                var elapsed: UInt64 = 0
                repeat {
                    for i in n..<(n + 256) { body(i) }
                    n += 256
                    elapsed = monotonicNanoseconds() - start
                } while Double(elapsed) < seconds * 1e9
                rates.append(Double(n) / (Double(elapsed) / 1e9))
            }
            out.send("LOCAL \(name) \(median(rates))")
        }

        // After each run of sets, untimed: the writes reach disk (and, attached, the daemon
        // has them), so the next measurement does not share the CPU with their backlog.
        func settle() { store.synchronize() }

        rate("hearth.set.string") { store.set(strings[$0 & 1], forKey: "s") }
        settle()
        rate("defaults.set.string") { defaults.set(strings[$0 & 1], forKey: "s") }
        rate("hearth.get.string") { sink &+= store.string(forKey: "s")?.utf8.count ?? 0; _ = $0 }
        rate("defaults.get.string") { sink &+= defaults.string(forKey: "s")?.utf8.count ?? 0; _ = $0 }

        rate("hearth.set.data1k") { store.set(datas[$0 & 1], forKey: "d") }
        settle()
        rate("defaults.set.data1k") { defaults.set(datas[$0 & 1], forKey: "d") }
        rate("hearth.get.data1k") { sink &+= store.data(forKey: "d")?.count ?? 0; _ = $0 }
        rate("defaults.get.data1k") { sink &+= defaults.data(forKey: "d")?.count ?? 0; _ = $0 }

        rate("hearth.set.dict100") { store.set(dictionaries[$0 & 1], forKey: "m") }
        settle()
        rate("defaults.set.dict100") { defaults.set(dictionaries[$0 & 1], forKey: "m") }
        rate("hearth.get.dict100") { sink &+= store.dictionary(forKey: "m")?.count ?? 0; _ = $0 }
        rate("defaults.get.dict100") { sink &+= defaults.dictionary(forKey: "m")?.count ?? 0; _ = $0 }
        // The Swift-native API skips the Foundation conversions both ways.
        rate("hearth.setValue.dict100") { try? store.setValue(plists[$0 & 1], forKey: "n") }
        settle()
        rate("hearth.value.dict100") {
            if case .dictionary(let d)? = store.value(forKey: "n") { sink &+= d.count }
            _ = $0
        }
        store.synchronize()
        out.send("DONE \(sink)")
    }
}

/// `hearth-benchmarks open data=… config=… store=…`: how long opening a store takes,
/// from the initializer to the first value read, in a fresh process (as an app starts).
enum OpenMode {
    static func run(_ arguments: [String: String]) throws {
        var logger = Logger(label: "hearth")
        logger.logLevel = .warning
        // Signed in (the file lives under the account), but dialling nobody.
        let sync = SyncSettings(accountDirectory: arguments["config"], discovery: .none, listenHost: "127.0.0.1")
        let start = monotonicNanoseconds()
        let store = try UbiquitousKeyValueStore(storeIdentifier: arguments["store"]!,
                                                configuration: .init(dataDirectory: arguments["data"]!, sync: sync, logger: logger))
        let value = store.data(forKey: "key-0000")
        let elapsed = monotonicNanoseconds() - start
        LineWriter(fd: 1).send("OPEN \(elapsed) \(store.usage.keys) \(value?.count ?? -1)")
        _exit(0)   // nothing to save, and the engine need not wind down
    }
}
