import Foundation
import Hearth
import Logging
import Synchronization

/// `hearth-benchmarks peer key=value…`: one store of the household in its own process,
/// driven by the parent through stdin and reporting on stdout.
///
/// Arguments: `data=` data directory, `config=` account directory, `port=` listen port,
/// `peers=` comma-separated `host:port` list (empty: nobody is dialled), `store=` store id,
/// `stores=` how many stores the device has open (the measured one, and idle others beside it;
/// default 1), `discovery=avahi` to find peers by mDNS (inside the test network) instead.
enum PeerMode {
    static func run(_ arguments: [String: String]) async throws {
        let out = LineWriter(fd: 1)
        let peers = (arguments["peers"] ?? "").split(separator: ",").map(String.init)
        let discovery: SyncSettings.Discovery = arguments["discovery"] == "avahi" ? .automatic : peers.isEmpty ? .none : .staticPeers(peers)
        let sync = SyncSettings(accountDirectory: arguments["config"], discovery: discovery,
                                listenHost: "127.0.0.1", port: Int(arguments["port"] ?? "0") ?? 0)
        var logger = Logger(label: "hearth")
        // HEARTH_BENCH_LOG=debug shows the library's log of the peer processes.
        logger.logLevel = ProcessInfo.processInfo.environment["HEARTH_BENCH_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
        let configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: arguments["data"]!, sync: sync, logger: logger)
        let observer = Observer(out: out)
        // Registered before the store opens, so the initial sync cannot slip past it.
        let token = NotificationCenter.default.addObserver(forName: UbiquitousKeyValueStore.didChangeExternallyNotification,
                                                           object: nil, queue: nil) { note in observer.received(note) }
        let opened = monotonicNanoseconds()
        observer.opened.withLock { $0 = opened }
        let identifier = arguments["store"] ?? "com.example.bench"
        let store = try UbiquitousKeyValueStore(storeIdentifier: identifier, configuration: configuration)
        observer.store.withLock { $0 = store }
        // The other stores of the device (the scale curve): open, synced on the same connections, idle.
        let others = try (1..<max(1, Int(arguments["stores"] ?? "1") ?? 1)).map { k in
            try UbiquitousKeyValueStore(storeIdentifier: "\(identifier).other\(k)", configuration: configuration)
        }
        let port = try await store.syncPort() ?? -1
        out.send("READY \(port) \(opened)")

        // Commands are read on a thread of their own: a blocking read must not take one of
        // the two cooperative threads the sync engine runs on.
        let done = Commands(store: store, out: out, observer: observer)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread { done.loop(); continuation.resume() }
            thread.start()
        }
        NotificationCenter.default.removeObserver(token)
        for other in others { await other.internals.close() }
        await store.stopSync()
        store.synchronize()
        out.send("BYE")
    }
}

/// Watches external changes and reports the ones the parent measures.
final class Observer: Sendable {
    let out: LineWriter
    let store = Mutex<UbiquitousKeyValueStore?>(nil)
    let opened = Mutex<UInt64>(0)
    /// The key whose changes are reported as latency samples (`watch` changes it).
    let latencyKey = Mutex("lat")
    /// Throughput: how many `tp-` keys make a batch, and how many of this batch arrived.
    let batch = Mutex<(size: Int, seen: Int)>((0, 0))

    init(out: LineWriter) { self.out = out }

    func received(_ note: Notification) {
        let now = monotonicNanoseconds()
        let reason = note.userInfo?[NSUbiquitousKeyValueStoreChangeReasonKey] as? Int ?? -1
        let keys = note.userInfo?[NSUbiquitousKeyValueStoreChangedKeysKey] as? [String] ?? []
        guard let store = store.withLock({ $0 }) else {
            // Only the initial sync can race the store's assignment; it is reported below.
            if reason == 1 { out.send("INIT \(opened.withLock { $0 }) \(now) \(keys.count)") }
            return
        }
        if reason == 1 {
            out.send("INIT \(opened.withLock { $0 }) \(now) \(keys.count)")
            return
        }
        let watched = latencyKey.withLock { $0 }
        if keys.contains(watched) {
            out.send("L \(store.longLong(forKey: watched)) \(now)")
        }
        if keys.contains("bu-done") {
            out.send("BD \(now)")
        }
        let batchKeys = keys.lazy.filter { $0.hasPrefix("tp-") }.count
        if batchKeys > 0 {
            let complete = batch.withLock { b -> Bool in
                b.seen += batchKeys
                guard b.size > 0, b.seen >= b.size else { return false }
                b.seen -= b.size
                return true
            }
            if complete { out.send("TB \(now)") }
        }
    }
}

/// The command loop of a peer child (see `PeerMode`).
final class Commands: Sendable {
    let store: UbiquitousKeyValueStore
    let out: LineWriter
    let observer: Observer
    private let reader = LineReader(fd: 0)

    init(store: UbiquitousKeyValueStore, out: LineWriter, observer: Observer) {
        self.store = store
        self.out = out
        self.observer = observer
    }

    /// Runs an async call from this thread and waits for it.
    private func blocking(_ body: @escaping @Sendable () async -> Void) {
        let semaphore = DispatchSemaphore(value: 0)
        Task { await body(); semaphore.signal() }
        semaphore.wait()
    }

    func loop() {
        while let line = try? reader.readLine(timeout: 86_400, who: "parent") {
            let f = line.split(separator: " ").map(String.init)
            guard let command = f.first else { continue }
            switch command {
            case "quit":
                return
            case "peers":
                out.send("P \(store.connectedPeerCount)")
            case "attached":
                // Attached to another process (a device daemon) that holds and syncs the store.
                out.send("A \(store.internals.isAttached)")
            case "lat":
                // The value is the send time: the receiver subtracts it from its arrival time.
                let key = f.count > 1 ? f[1] : "lat"
                let t0 = monotonicNanoseconds()
                store.set(Int64(t0), forKey: key)
                out.send("S \(t0)")
            case "watch":
                observer.latencyKey.withLock { $0 = f[1] }
                out.send("OK")
            case "tparm":
                observer.batch.withLock { $0 = (Int(f[1])!, 0) }
                out.send("OK")
            case "tpbatch":
                // Batch b: n distinct keys, each set once, so no write coalesces with another.
                let b = Int64(f[1])!, n = Int(f[2])!
                for i in 0..<n { store.set(b, forKey: "tp-\(i)") }
                out.send("W \(monotonicNanoseconds())")
            case "burst":
                // As fast as the caller can: later writes to a key supersede earlier ones.
                let n = Int(f[1])!, keys = Int(f[2])!
                let start = monotonicNanoseconds()
                for i in 0..<n { store.set(Int64(i), forKey: "bu-\(i % keys)") }
                store.set(Int64(start), forKey: "bu-done")
                out.send("W \(start) \(monotonicNanoseconds())")
            case "fill":
                let count = Int(f[1])!, size = Int(f[2])!
                for i in 0..<count { store.set(randomData(size), forKey: key(i)) }
                out.send("F \(store.usage.bytes) \(store.usage.keys)")
            case "change":
                store.set(randomData(Int(f[2])!), forKey: key(Int(f[1])!))
                out.send("OK")
            case "count":
                out.send("C \(store.usage.keys) \(store.usage.bytes)")
            case "metrics":
                let m = store.syncMetrics
                out.send("M \(m?.bytesSent ?? -1) \(m?.bytesReceived ?? -1) \(m?.entriesSent ?? -1) \(m?.entriesReceived ?? -1) \(m?.sessions ?? -1)")
            case "types", "rtypes":
                // Frames sent (received, for rtypes) by message type: "T type:bytes:messages …".
                let tallies = (f[0] == "types" ? store.syncMetrics?.sentByType : store.syncMetrics?.receivedByType) ?? [:]
                out.send("T " + tallies.keys.sorted().map { "\($0):\(tallies[$0]!.bytes):\(tallies[$0]!.messages)" }.joined(separator: " "))
            case "rusage":
                let switches = contextSwitches()
                out.send("R \(cpuMicroseconds()) \(switches.voluntary) \(switches.involuntary) \(monotonicNanoseconds())")
            case "rss":
                out.send("RSS \(procStatus("VmRSS")) \(procStatus("VmHWM")) \(procStatus("Threads"))")
            case "synced":
                let store = self.store, out = self.out, peers = Int(f[1])!
                blocking { out.send("Y \(await store.waitUntilSynced(peers: peers, timeout: .seconds(20)) ? 1 : 0)") }
            case "stop":
                let store = self.store, out = self.out
                blocking { await store.stopSync(); out.send("OK") }
            case "resume":
                let store = self.store, out = self.out
                blocking {
                    store.resumeSync()
                    _ = try? await store.syncPort()
                    out.send("OK")
                }
            default:
                out.send("ERR unknown command \(line)")
            }
        }
    }

    func key(_ i: Int) -> String { "key-" + String(repeating: "0", count: max(0, 4 - String(i).count)) + String(i) }
}

func randomData(_ size: Int) -> Data {
    var generator = SystemRandomNumberGenerator()
    var bytes = [UInt8](repeating: 0, count: size)
    for i in stride(from: 0, to: size, by: 8) {
        let word = generator.next()
        for j in 0..<min(8, size - i) { bytes[i + j] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(j))) }
    }
    return Data(bytes)
}
