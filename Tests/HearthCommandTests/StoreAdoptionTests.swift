import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import HearthTestSupport
import HearthTesting
import HearthTransport
import Logging
import NIOCore
import Testing

/// A member of the household that names stores it never fills (issue 26, point 3): a device
/// daemon takes up a store a peer serves, so a hello naming 1,024 made-up stores made the
/// victim open 1,024 store files, run out of descriptors at systemd's default soft limit of
/// 1,024, and reopen the junk at every start. The victim here is a real `hearth daemon`,
/// started with that soft limit; a legitimate device (the kitchen's daemon) keeps adding stores.
@Suite(.serialized, .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
struct StoreAdoptionTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-adopt-\(UUID().uuidString)").path
    let runtime = "/tmp/hrt-\(UUID().uuidString.prefix(8))"

    func environment(_ name: String) throws -> [String: String] {
        try HearthCLI.environment(runtime: runtime, root: root, device: name)
    }

    func run(_ arguments: [String], _ environment: [String: String]) async throws -> (status: Int32?, output: String, error: String) {
        try await HearthCLI.run(arguments, environment: environment)
    }

    /// `hearth daemon` with the soft open-file limit at `nofile` (systemd's default is 1,024).
    func startDaemon(_ arguments: [String], _ environment: [String: String], nofile: Int? = 1024) async throws -> ChildProcess {
        let binary = try #require(HearthCLI.binary)
        let level = ProcessInfo.processInfo.environment["HEARTH_LOG_LEVEL"].map { ["--log-level", $0] } ?? []
        let daemon = try ChildProcess("/bin/sh", ["-c", (nofile.map { "ulimit -S -n \($0) && " } ?? "") + "exec \"$0\" \"$@\"", binary, "daemon"] + arguments + level,
                                      environment: environment)
        let started = await daemon.waitForOutput("Ctrl-C to stop", inErrors: true, upTo: .seconds(30))
        try #require(started, "the daemon did not start: \(daemon.errorOutput)")
        return daemon
    }

    /// Whether `device`'s daemon holds `store` (a store it keeps on disk).
    func holds(_ store: String, _ device: Device) async throws -> Bool {
        try await run(["daemon", "status", "--json"], try environment(device.name)).output.contains("\"store\":\"\(store)\"")
    }

    @Test("A member's hello naming 1,024 made-up stores: the victim (soft limit 1,024 files) takes up at most 16, writes none to disk, and the kitchen's new stores still sync, before and after a restart")
    func junkStores() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let (laptop, kitchen) = try await Device.household(root: root)
        let laptopOptions = laptop.directories + ["--port", String(laptop.port), "--peer", "127.0.0.1:\(kitchen.port)", "--rescan-interval", "0.5"]
        var victim = try await startDaemon(laptopOptions, try environment(laptop.name))
        defer { victim.terminate() }
        let limits = try String(contentsOfFile: "/proc/\(victim.pid)/limits", encoding: .utf8)
        let softLimit = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }?
            .split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).first.flatMap { Int($0) })
        try #require(softLimit == 1024, "\(limits)")
        let kitchenDaemon = try await startDaemon(kitchen.directories + ["--port", String(kitchen.port), "--peer", "127.0.0.1:\(laptop.port)"],
                                                  try environment(kitchen.name), nofile: nil)
        defer { kitchenDaemon.terminate() }

        /// A store the kitchen's app creates: the victim's daemon takes it up and, once it holds
        /// the value, keeps it on disk; `hearth get` there then reads it.
        func kitchenWrites(_ store: String, _ value: String) async throws {
            let set = try await run(["set", "--store", store, "k", value, "--wait", "0"] + kitchen.directories, try environment(kitchen.name))
            try #require(set.status == 0, "\(set.error)")
            let held = try await laptop.untilSaved(deadline: .seconds(60)) { try await holds(store, laptop) }
            #expect(held, "\(store) not held by the victim:\n\(victim.errorOutput.suffix(3000))")
            let read = try await run(["get", "--store", store, "k"] + laptop.directories, try environment(laptop.name))
            #expect(read.output == "\(value)\n", "\(read.error)")
        }
        try await kitchenWrites("com.example.before", "1")

        // The attack: a member of the household, with its own valid certificate.
        let bundle = try Data(contentsOf: URL(fileURLWithPath: "\(root)/home.bundle"))
        let rogue = try AccountStore(directory: URL(fileURLWithPath: "\(root)/rogue"), logger: Logger(label: "test"), scrypt: .testing)
            .importJoinBundle(bundle, passphrase: "pw", deviceName: "rogue")
        let junk = (0..<SyncMessage.maximumStores).map { "com.junk.\($0)" }
        let cpuBefore = try Self.cpuSeconds(victim.pid)
        let link = try await JunkLink(identity: rogue, port: laptop.port)
        defer { link.close() }
        let started = ContinuousClock.now
        try link.send(.hello(SyncMessage.Hello(protocolVersion: SyncMessage.protocolVersion, account: Data(rogue.account.id.bytes), stores: junk.map {
            SyncMessage.Hello.Store(identifier: $0, vectorDigest: SyncMessage.vectorDigest(VersionVector()),
                                    peersDigest: SyncMessage.peersDigest([rogue.deviceID.data]))
        })))
        // The victim reads frames in order: the pong comes once it has dealt with every store named.
        try link.send(.ping([:]))
        let answered = await link.waitForPong(within: .seconds(60))
        let took = ContinuousClock.now - started
        let cpu = try Self.cpuSeconds(victim.pid) - cpuBefore
        print("point 3: the victim dealt with the hello in \(took), using \(String(format: "%.2f", cpu)) s of CPU")
        #expect(answered, "the victim did not answer after the hostile hello:\n\(victim.errorOutput.suffix(3000))")

        // During: a new store of the kitchen's still syncs.
        try await kitchenWrites("com.example.during", "2")
        let descriptors = try Self.descriptors(victim.pid), rss = try Self.rssMegabytes(victim.pid)
        print("point 3: victim under attack: \(descriptors) descriptors (soft limit \(softLimit)), RSS \(rss) MB")
        #expect(descriptors < 200, "\(descriptors) descriptors")
        #expect(rss < 100)
        #expect(Self.storeFiles(laptop, containing: "junk").isEmpty, "junk store files: \(Self.storeFiles(laptop, containing: "junk").count)")
        let output = victim.errorOutput
        #expect(!output.contains("Too many open files"))
        let refusals = output.components(separatedBy: "stores no app here uses").count - 1
        #expect(refusals == 1, "\(refusals) refusal lines")
        #expect(try await link.isOpen, "the victim dropped the member's link")

        // After a restart: no junk reopened, the kitchen's stores still sync, old and new.
        victim.send(SIGTERM)
        #expect(await victim.wait(upTo: .seconds(30)) == 0, "\(victim.errorOutput.suffix(2000))")
        victim = try await startDaemon(laptopOptions, try environment(laptop.name))
        #expect(Self.storeFiles(laptop, containing: "junk").isEmpty)
        try await kitchenWrites("com.example.after", "3")
        let set = try await run(["set", "--store", "com.example.before", "k", "4"] + kitchen.directories, try environment(kitchen.name))
        #expect((set.output + set.error).contains("confirmed by 1 peer device"), "\(set.output) \(set.error)")
        // The kitchen's stores were written for it and count against it (`hearth get` reads the
        // file); one this device's user writes to is forgiven (the daemon holds it for the command).
        func record() -> String {
            let file = Self.storeFiles(laptop, containing: "adopted-stores").first.flatMap { FileManager.default.contents(atPath: "\(laptop.data)/\($0)") }
            return String(decoding: file ?? Data(), as: UTF8.self)
        }
        #expect(record().contains("com.example.during") && record().contains("com.example.after"), "\(record())")
        let local = try await run(["set", "--store", "com.example.during", "k", "5"] + laptop.directories, try environment(laptop.name))
        #expect(local.status == 0, "\(local.error)")
        #expect(await untilFilesChange([laptop.data], deadline: .seconds(10)) { !record().contains("com.example.during") }, "\(record())")
        #expect(record().contains("com.example.after"))
        let descriptorsAfter = try Self.descriptors(victim.pid)
        print("point 3: victim after a restart: \(descriptorsAfter) descriptors, RSS \(try Self.rssMegabytes(victim.pid)) MB")
        #expect(descriptorsAfter < 200)
    }

    static func storeFiles(_ device: Device, containing text: String) -> [String] {
        let files = FileManager.default.enumerator(atPath: device.data)?.compactMap { $0 as? String } ?? []
        return files.filter { $0.contains(text) }
    }

    static func descriptors(_ pid: pid_t) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
    }

    static func rssMegabytes(_ pid: pid_t) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        let kilobytes = try #require(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) })
        return kilobytes / 1024
    }

    /// utime + stime of `pid`, in seconds.
    static func cpuSeconds(_ pid: pid_t) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // After the command's name in parentheses: state is field 3, utime 14, stime 15.
        let fields = try #require(stat.split(separator: ")").last).split(separator: " ")
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return (Double(fields[11])! + Double(fields[12])!) / ticks
    }
}

/// A member's connection driven by hand: frames out as the test says; pongs noted.
final class JunkLink: Sendable {
    private let outgoing: AsyncStream<[UInt8]>.Continuation
    private let state = Locked<(pongs: Int, closed: Bool)>((0, false))
    /// Signalled at each pong and when the link closes: what the waits below wake on.
    private let changes = ChangeSignal()
    private let task: Task<Void, Never>

    init(identity: DeviceIdentity, port: Int) async throws {
        let connection = try await PeerTransport(identity: identity, logger: Logger(label: "test")).connect(host: "127.0.0.1", port: port)
        let (stream, outgoing) = AsyncStream<[UInt8]>.makeStream()
        self.outgoing = outgoing
        let state = self.state, changes = self.changes
        let sender = connection.peer.deviceID.data
        task = Task {
            _ = try? await connection.executeThenClose { inbound, outbound in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { for await payload in stream { try await outbound.write(ByteBuffer(bytes: payload)) } }
                    group.addTask {
                        for try await frame in inbound {
                            guard let message = try? SyncMessage(decoding: Data(frame.readableBytesView), sender: sender) else { continue }
                            switch message {
                            case .ping: if let pong = try? SyncMessage.pong([:]).encoded() { outgoing.yield(Array(pong)) }
                            case .pong:
                                state.withLock { $0.pongs += 1 }
                                changes.signal()
                            default: break
                            }
                        }
                    }
                    _ = try await group.next()
                    group.cancelAll()
                }
            }
            state.withLock { $0.closed = true }
            changes.signal()
        }
    }

    func send(_ message: SyncMessage) throws { outgoing.yield(Array(try message.encoded())) }

    func waitForPong(within timeout: Duration) async -> Bool {
        await ChangeSignal.waitUntil(ContinuousClock.now + timeout, observing: { [changes] }) { state.withLock { $0.pongs > 0 } }
    }

    /// Whether the victim still answers on this link.
    var isOpen: Bool {
        get async throws {
            let before = state.withLock { $0.pongs }
            try send(.ping([:]))
            _ = await ChangeSignal.waitUntil(ContinuousClock.now + .seconds(20), observing: { [changes] }) {
                state.withLock { $0.pongs > before || $0.closed }
            }
            return state.withLock { $0.pongs > before }
        }
    }

    func close() {
        outgoing.finish()
        task.cancel()
    }
}
