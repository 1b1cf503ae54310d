import Foundation
import HearthCore
import HearthIdentity
@testable import HearthSync
import HearthTesting
import HearthTestSupport
import HearthTransport
import NIOCore
import NIOPosix
import Logging
import Testing

/// 8 devices in one process on the in-memory network (issue 27, "seams for a simulation"): a
/// full mesh of real sync engines and sessions, every message encoded and decoded, every entry
/// signed and verified, no sockets, no TLS, no timing. The wall clock is the test's: write `i`
/// is made at `t0 + i` ms on whichever device, so every stamp, and so the final state, depends
/// on the seed alone, not on when messages arrive.
@Suite("8 devices in memory")
struct InMemoryMeshTests {
    static let devices = 8
    static let writes = 1_000
    static let keys = 50
    /// The virtual wall clock's start (any fixed time; certificates are checked at the real one).
    static let t0: UInt64 = 1_700_000_000_000

    /// What one run ended with.
    struct Outcome {
        /// SHA-256 of every replica's live entries (key, value, stamp, writing device's index).
        let digest: String
        let seconds: Double
        /// CPU time of the whole process meanwhile (every thread, other tests' included).
        let cpu: Double
        /// Deltas applied, and how many of them were applied off the loop the run was given (if any).
        let applied: Int
        let appliedOffLoop: Int
    }

    @Test("A 1,000-write random workload on 8 devices converges, to the same state for the same seed and another for another seed (times printed)",
          .timeLimit(.minutes(1)))
    func meshConvergesDeterministically() async throws {
        let first = try await Self.run(seed: 27)
        let again = try await Self.run(seed: 27)
        let other = try await Self.run(seed: 28)
        let outcomes = [first, again, other]
        print("8 devices, \(Self.writes) writes: converged in " + outcomes.map { "\(Self.milliseconds($0.seconds)) (CPU \(Self.milliseconds($0.cpu)))" }.joined(separator: ", ")
              + " (seeds 27, 27, 28); digests \(first.digest.prefix(16)), \(again.digest.prefix(16)), \(other.digest.prefix(16))")
        #expect(first.digest == again.digest, "the same seed ended in another state")
        #expect(first.digest != other.digest, "another seed ended in the same state")
        // The times are printed, not asserted: a test does not fail by timing (a loaded machine
        // only makes a run slower). On a quiet machine a run takes 140-180 ms, CPU about 300 ms
        // in a debug build; the closing figures of issue 27 quote them.
    }

    @Test("On one event loop, as the household simulator runs them, every session runs there and the workload ends in the same state",
          .timeLimit(.minutes(1)))
    func meshOnOneLoop() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let spread = try await Self.run(seed: 27)
        let confined = try await Self.run(seed: 27, on: loop)
        try await group.shutdownGracefully()
        print("8 devices, \(Self.writes) writes on one event loop: converged in \(Self.milliseconds(confined.seconds)) (CPU \(Self.milliseconds(confined.cpu))); digest \(confined.digest.prefix(16))")
        #expect(confined.digest == spread.digest, "one loop ended in another state than a loop per link")
        // Deltas are applied by the receiving session: on its link's loop, so on this one.
        #expect(confined.applied > 0)
        #expect(confined.appliedOffLoop == 0, "\(confined.appliedOffLoop) of \(confined.applied) deltas were applied off the network's loop")
    }

    @Test("With sessions on several threads (NIO's multi-threaded group, as over TLS) the workload ends in the same state",
          .timeLimit(.minutes(1)))
    func meshOnSeveralLoops() async throws {
        // Two threads at least, whatever the machine: sessions of one engine then run at once.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(2, System.coreCount))
        let spread = try await Self.run(seed: 27)
        let threaded = try await Self.run(seed: 27, loops: group)
        try await group.shutdownGracefully()
        print("8 devices, \(Self.writes) writes on \(max(2, System.coreCount)) event loops: converged in \(Self.milliseconds(threaded.seconds)) (CPU \(Self.milliseconds(threaded.cpu))); digest \(threaded.digest.prefix(16))")
        // It hung unconverged about 1 run in 30 before a peer was known from its link up
        // (docs/architecture.md, "Who runs where"; KnownAtLinkUpTests).
        #expect(threaded.digest == spread.digest, "several loops ended in another state than the default")
    }

    @Test("The in-memory network checks certificates as the handshake does: an expired one is refused, another account's is not trusted, a removed device is handed its removal record")
    func certificatesAreChecked() async throws {
        var logger = Logger(label: "mesh")
        logger.logLevel = .critical
        let network = InMemoryNetwork()
        let home = try AccountAuthority.create(displayName: "Home")
        let a = try home.makeDevice(named: "A")
        let removals = DeviceRemovals(trust: home.account.trust, logger: logger)
        let engine = try SyncEngine(identity: a, replica: MemoryReplica(storeIdentifier: "s"), removals: removals,
                                    environment: network.environment(), logger: logger)
        let port = try await engine.start()
        func dial(_ identity: DeviceIdentity) async throws -> any PeerLink {
            try await network.maker(PeerNetworkSetup(identity: identity, removals: nil, removalNotice: nil, logger: logger))
                .dial(host: "memory", port: port, expecting: nil)
        }

        // A device of the account whose certificate has expired: the listener refuses it (the
        // dialler reads the refusal, as a TLS 1.3 client does), and no session starts.
        let now = Date()
        let expired = try home.makeDevice(named: "expired", notBefore: now.addingTimeInterval(-3600), notAfter: now.addingTimeInterval(-60))
        await #expect(throws: TLSError.self) { _ = try await Self.firstFrame(of: try await dial(expired)) }
        // A device of another account: the dialler does not trust the listener's certificate.
        let stranger = try AccountAuthority.create(displayName: "Other").makeDevice(named: "stranger")
        await #expect(throws: TLSError.self) { _ = try await dial(stranger) }
        // A removed device: handed the signed record of its removal, and nothing else.
        let phone = try home.makeDevice(named: "phone")
        removals.merge([try home.removal(of: phone.deviceID, named: "phone")])
        let frame = try #require(try await Self.firstFrame(of: try await dial(phone)))
        guard case .removals(let records) = try SyncMessage(decoding: Data(frame.readableBytesView), sender: a.deviceID.data) else {
            Issue.record("the removed device was sent something else than its removal")
            return
        }
        #expect(records.map(\.device) == [phone.deviceID])
        #expect(engine.connectedPeers.isEmpty)
        // A device of the account in good standing gets a session.
        let laptop = try home.makeDevice(named: "laptop")
        let link = try await dial(laptop)
        #expect(link.peer.deviceID == a.deviceID)
        await link.close()
        await engine.stop()
    }

    /// The first frame `link` reads (nil if it ends first).
    static func firstFrame<Link: PeerLink>(of link: Link) async throws -> ByteBuffer? {
        try await link.executeThenClose { inbound, _ in
            for try await frame in inbound { return frame }
            return nil
        }
    }


    /// CPU seconds this process has used.
    static func processCPU() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static func milliseconds(_ seconds: Double) -> String { "\(Int((seconds * 1000).rounded())) ms" }

    /// Builds the mesh, draws the workload from `seed`, waits until every replica holds the same live entries, and
    /// checks that every replica holds the same entries. Timed from the engines' creation to convergence.
    /// `loop`: every session runs on it (the network's only loop), and each delta applied is
    /// checked to be applied there.
    static func run(seed: UInt64, on loop: (any EventLoop)? = nil, loops group: (any EventLoopGroup)? = nil) async throws -> Outcome {
        // Identities: one account, 8 devices (key generation is not what is measured).
        let authority = try AccountAuthority.create(displayName: "Mesh household")
        let identities = try (0..<devices).map { try authority.makeDevice(named: "device-\($0)") }
        var logger = Logger(label: "mesh")
        logger.logLevel = ProcessInfo.processInfo.environment["HEARTH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning

        let started = ContinuousClock.now
        let cpuStart = Self.processCPU()
        let wall = Locked(t0)
        // The test's wall clock; monotonic time stays the system's (no heartbeat is due within a run).
        var clock = SyncClock.system
        clock.wallMilliseconds = { wall.withLock { $0 } }
        let network = loop.map { InMemoryNetwork(eventLoops: $0) } ?? group.map { InMemoryNetwork(eventLoops: $0) } ?? InMemoryNetwork()
        let environment = network.environment(clock: clock, random: .seeded(SplitMix64(seed: seed)))
        let applies = Locked((all: 0, offLoop: 0))
        let convergence = Convergence()
        let replicas = identities.enumerated().map { index, identity in
            // Origins bound to their device, numbered by index (not random), so a run is replayable.
            MemoryReplica(storeIdentifier: "com.example.mesh",
                          replica: Replica(id: ReplicaID(high: ReplicaID.devicePrefix(of: identity.deviceID.data), low: UInt64(index))),
                          wall: { wall.withLock { $0 } }, applied: {
                              let off = loop.map { !$0.inEventLoop } ?? false
                              applies.withLock { $0.all += 1; if off { $0.offLoop += 1 } }
                              convergence.check()
                          })
        }
        convergence.watch(replicas)
        let engines = try identities.enumerated().map { index, identity in
            try SyncEngine(identity: identity, replica: replicas[index], options: .init(host: "memory"), environment: environment, logger: logger)
        }
        var ports: [Int] = []
        for engine in engines { ports.append(try await engine.start()) }
        // A full mesh: each device dials those after it.
        for i in 0..<devices {
            for j in (i + 1)..<devices { engines[i].addPeer(host: "memory", port: ports[j]) }
        }

        // The workload: sets (4 in 5) and removals of 50 keys on random devices, at t0 + i ms.
        var random = SplitMix64(seed: seed)
        for i in 1...writes {
            let device = Int(random.next() % UInt64(devices))
            let key = StoreKey("k\(random.next() % UInt64(keys))")
            let value: PropertyListValue? = random.next() % 5 == 0 ? nil : .integer(Int64(random.next() % 1_000_000))
            wall.withLock { $0 = t0 + UInt64(i) }
            try replicas[device].write(value, forKey: key)
        }

        let converged = await convergence.wait()
        if !converged { print(await MeshDiagnostics.dump(replicas: replicas, engines: engines)) }
        let seconds = (ContinuousClock.now - started) / .seconds(1)
        let cpu = Self.processCPU() - cpuStart
        for engine in engines { await engine.stop() }

        // Every replica holds the same live entries (tombstones may be collected at different moments).
        let origins = Dictionary(uniqueKeysWithValues: replicas.enumerated().map { ($1.replica.id, $0) })
        let states = replicas.map { replica in
            replica.replica.entries.values.filter { !$0.isTombstone }.sorted { $0.key < $1.key }
                .map { "\($0.key)=\($0.value.map { "\($0)" } ?? "-")@\($0.timestamp)#\(origins[$0.origin].map { "\($0)" } ?? "?")" }
        }
        for (index, state) in states.enumerated() {
            #expect(state == states[0], "device \(index) holds other entries than device 0")
        }
        #expect(!states[0].isEmpty)
        let digest = SHA256.hash(Array(states[0].joined(separator: "\n").utf8)).map { String(format: "%02x", $0) }.joined()
        let counted = applies.withLock { $0 }
        return Outcome(digest: digest, seconds: seconds, cpu: cpu, applied: counted.all, appliedOffLoop: counted.offLoop)
    }
}

/// Wakes the test when every replica holds the same live entries: checked after each delta
/// applied, so the test waits on the event itself, not on a poll.
///
/// Not "every vector equal": a receiver's vector counts the entries it received (it never takes
/// a sender's word for more), so a write superseded before it was sent to some device is
/// counted by its writer and not by that device, for good; their states are the same.
final class Convergence: Sendable {
    private struct State {
        var replicas: [MemoryReplica] = []
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Locked(State())

    func watch(_ replicas: [MemoryReplica]) { state.withLock { $0.replicas = replicas } }

    /// Each live entry's stamp, by key: every write has a stamp of its own (t0 + its index).
    static func live(_ replica: MemoryReplica) -> [StoreKey: HLCTimestamp] {
        replica.replica.entries.compactMapValues { $0.isTombstone ? nil : $0.timestamp }
    }

    /// Resumes the waiter if every replica holds the same live entries (read outside this lock:
    /// each takes its replica's).
    func check() {
        let replicas = state.withLock { $0.waiter == nil ? [] : $0.replicas }
        guard let first = replicas.first.map(Self.live), replicas.dropFirst().allSatisfy({ Self.live($0) == first }) else { return }
        state.withLock { s in defer { s.waiter = nil }; return s.waiter }?.resume()
    }

    /// Returns once every replica holds the same live entries (now, or after a delta applied
    /// later), or once the test's task is cancelled (its time limit): then the comparison after
    /// it fails and names the device that differs, where a wait that ignored cancellation hung
    /// the whole run (seen with sessions on several threads, docs/architecture.md).
    @discardableResult
    func wait() async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                state.withLock { $0.waiter = continuation }
                if Task.isCancelled { release() } else { check() }
            }
        } onCancel: {
            release()
        }
        let replicas = state.withLock { $0.replicas }
        guard let first = replicas.first.map(Self.live) else { return true }
        return replicas.dropFirst().allSatisfy { Self.live($0) == first }
    }

    private func release() {
        state.withLock { s in defer { s.waiter = nil }; return s.waiter }?.resume()
    }
}

/// Runs the mesh with its sessions on NIO's multi-threaded group (several threads, as over
/// TLS) as many times as `HEARTH_MESH_REPEAT` says, one round after another, each a test case
/// of its own: one that does not converge within its minute is cancelled, which ends its wait
/// and dumps its state (docs/architecture.md, "Who runs where"). Not part of the suite.
@Suite("8 devices in memory, repeated", .serialized)
struct InMemoryMeshRepeat {
    static let rounds = Int(ProcessInfo.processInfo.environment["HEARTH_MESH_REPEAT"] ?? "") ?? 0

    @Test(.enabled(if: rounds > 0), .timeLimit(.minutes(1)), arguments: 0..<max(rounds, 1))
    func repeatOnSeveralThreads(round: Int) async throws {
        let threads = Int(ProcessInfo.processInfo.environment["HEARTH_MESH_THREADS"] ?? "") ?? 0
        let group: any EventLoopGroup = threads > 0 ? MultiThreadedEventLoopGroup(numberOfThreads: threads) : MultiThreadedEventLoopGroup.singleton
        let outcome = try await InMemoryMeshTests.run(seed: 27 + UInt64(round % 2), loops: group)
        print("round \(round): \(InMemoryMeshTests.milliseconds(outcome.seconds))")
        if threads > 0 { try await group.shutdownGracefully() }
    }
}
