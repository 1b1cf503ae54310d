import Foundation
import Hearth
import HearthCore
import HearthDaemon
import HearthTestSupport
import HearthTesting
import Testing

/// The waits of HearthDaemon and HearthTesting are events with a deadline, not polls (issue 27,
/// point 5): a write's wait for peers follows the store's sync signals, `serve`'s open and a
/// forwarded write's retries follow the store's holder (``HolderWatch``), the TLS cluster's
/// waits follow its stores' sync signals. Each wait that must end on an event has a deadline
/// far away, and the test checks that it ended well before (a wait that missed its event runs
/// into it); each deadline is checked to end the wait, with the same outcome as before.
@Suite("HearthDaemon's waits end on events")
struct EventWaitTests {
    static let far = Duration.seconds(30)

    // MARK: A write's wait for peers (WriteOutcome.deliver, StoreInternals.waitForSync)

    static func withTwoDevices(_ body: (LoopbackCluster) async throws -> Void) async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, storeIdentifier: "com.example.delivery",
                                      linkTimeout: .seconds(60), connectTimeout: .seconds(60)) { cluster in
            try await cluster.waitUntilConnected()
            try await body(cluster)
        }
    }

    @Test("A write's wait for peers ends on the peer's acknowledgement, well before its deadline")
    func deliveryOnAck() async throws {
        try await Self.withTwoDevices { cluster in
            let (a, b) = (cluster[0], cluster[1])
            // The peer away: the wait is asleep before it can confirm anything.
            await cluster.isolate(1)
            try a.setValue("now", forKey: "k")
            let start = ContinuousClock.now
            async let outcome = WriteOutcome.deliver(a, key: "k", wait: Double(Self.far.components.seconds), minimumPeers: 1)
            while !a.internals.syncSignals.contains(where: { $0.waiting > 0 }) { await Task.yield() }
            try await cluster.heal(timeout: Self.far)
            #expect(await outcome == .confirmed(peers: 1, required: 1))
            #expect(ContinuousClock.now - start < Self.far, "the wait ran into its deadline: no signal woke it")
            #expect(b.string(forKey: "k") == "now")
        }
    }

    @Test("Fewer peers than required: the wait ends at its deadline, unconfirmed; while nothing changes its condition is not checked again")
    func deliveryDeadline() async throws {
        try await Self.withTwoDevices { cluster in
            let a = cluster[0]
            try a.setValue("v", forKey: "k")
            let start = ContinuousClock.now
            let outcome = await WriteOutcome.deliver(a, key: "k", wait: 0.5, minimumPeers: 2)
            #expect(outcome == .unconfirmed(peers: 1, required: 2))
            #expect(ContinuousClock.now - start >= .milliseconds(500))
            // Settled and idle: the condition is checked at once and after the deadline, and at
            // whatever the engine signals meanwhile (a heartbeat at most), not every few ms.
            let checks = Locked(0)
            let held = await a.internals.waitForSync(until: .now + .milliseconds(500)) {
                checks.withLock { $0 += 1 }
                return false
            }
            #expect(!held)
            #expect(checks.withLock { $0 } <= 4, "the condition was checked \(checks.withLock { $0 }) times in 0.5 s: polled")
        }
    }

    // MARK: The TLS cluster's waits (LoopbackCluster over TLS)

    @Test("Over TLS, the cluster's wait ends on the replicas' changes, well before its deadline; and at its deadline when they never agree")
    func tlsClusterWaits() async throws {
        try await withLoopbackCluster(replicas: 2, storeIdentifier: "com.example.tlswait") { cluster in
            try cluster[0].setValue(1, forKey: "k")
            let start = ContinuousClock.now
            try await cluster.waitUntilConverged(expected: ["k": 1], timeout: Self.far)
            #expect(ContinuousClock.now - start < Self.far)
            let late = ContinuousClock.now
            await #expect(throws: LoopbackClusterError.self) {
                try await cluster.waitUntilConverged(expected: ["k": 2], timeout: .milliseconds(300))
            }
            #expect(ContinuousClock.now - late >= .milliseconds(300))
            // Links cut and made again: only the engines' signals tell (no value changes).
            await cluster.isolate(1)
            let healing = ContinuousClock.now
            try await cluster.heal(timeout: Self.far)
            #expect(ContinuousClock.now - healing < Self.far)
        }
    }

    // MARK: Waiting for the store's holder (HostedStore's open, WriteRequest.perform)

    /// A signed-out store in a folder of its own, and a process named `hearth` (as a one-shot
    /// `hearth set` is) that holds its lock, written into the lock file as the library does.
    final class HeldStore: Sendable {
        let root = "/tmp/hew-\(UUID().uuidString.prefix(8))"
        let access: StoreAccess
        let holder: Process

        init() throws {
            let folders = DeviceFolders(accountDirectory: URL(fileURLWithPath: "\(root)/config"), storeDataDirectory: "\(root)/data",
                                        controlSocketBase: root)
            var access = StoreAccess(folders: folders, peering: PeerSettings(), storeIdentifier: "com.example.held", identity: nil)
            // A missed event would show as a wait to the deadline, not as a re-check a second later.
            access.holderBlindInterval = 120_000
            self.access = access
            let lockPath = access.location.lockPath
            try FileManager.default.createDirectory(atPath: (lockPath as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: lockPath, contents: nil))
            // `sleep` under the name hearth (/proc/PID/comm): a holder that may let go soon.
            try FileManager.default.createSymbolicLink(atPath: "\(root)/hearth", withDestinationPath: "/bin/sleep")
            holder = Process()
            holder.executableURL = URL(fileURLWithPath: "/bin/sh")
            // Locked through a read-only descriptor: its exit makes no IN_CLOSE_WRITE; only the
            // holder's pidfd can tell.
            holder.arguments = ["-c", "exec 9<\"$0\"; flock -x 9; echo held; exec \"$1\" 120", lockPath, "\(root)/hearth"]
            let output = Pipe()
            holder.standardOutput = output
            try holder.run()
            let line = String(decoding: output.fileHandleForReading.readData(ofLength: 5), as: UTF8.self)
            try #require(line.hasPrefix("held"), "the holder did not lock: \(line)")
            try Data("\(holder.processIdentifier)\n".utf8).write(to: URL(fileURLWithPath: lockPath))
        }

        /// ``access``, its waits for the holder signalling `asleep` as each goes to sleep.
        func access(signalling asleep: ChangeSignal) -> StoreAccess {
            var access = access
            access.holderWaitAsleep = asleep
            return access
        }

        func kill() {
            if holder.isRunning { Foundation.kill(holder.processIdentifier, SIGKILL) }
            holder.waitUntilExit()
        }

        func cleanUp() {
            kill()
            try? FileManager.default.removeItem(atPath: root)
        }
    }

    /// Notes said, and a way to wait for one (the test's own wait: a yield loop, bounded).
    final class Notes: Sendable {
        private let lines = Locked<[String]>([])
        var output: DaemonOutput {
            DaemonOutput(note: { [lines] line in lines.withLock { $0.append(line) } }, emit: { _ in })
        }

        func waitFor(_ text: String) async -> Bool {
            let deadline = ContinuousClock.now + EventWaitTests.far
            while ContinuousClock.now < deadline {
                if lines.withLock({ $0.contains { $0.contains(text) } }) { return true }
                await Task.yield()
            }
            return false
        }
    }

    @Test("serve's open of a held store ends when the holder exits (its pidfd), well before the deadline; a stop signal ends it too")
    func serveOpenWaitsForHolder() async throws {
        let held = try HeldStore()
        defer { held.cleanUp() }
        let notes = Notes()
        let asleep = ChangeSignal()
        let access = held.access(signalling: asleep)
        // Waiting on the stop signal too, as serve does; it never comes here.
        let stopped = ChangeSignal()
        let start = ContinuousClock.now
        let opening = Task {
            try await HostedStore.open(access, label: "serve", output: notes.output, shouldStop: { false }, stopped: stopped)
        }
        #expect(await notes.waitFor("waiting for it to be free"))
        // Killed once the open's watch is asleep on the holder: only its pidfd can tell then.
        #expect(await ChangeSignal.waitUntil(ContinuousClock.now + Self.far, observing: { [asleep] }) { asleep.generation > 0 })
        held.kill()
        // A wait that missed the holder's exit ends only when the test gives up on it at `far`
        // (cancelled, the open returns nil).
        let hosted = try await opening.bounded(by: Self.far).value
        #expect(hosted != nil, "the open was cancelled at the test's bound: the holder's exit did not end its wait")
        #expect(ContinuousClock.now - start < Self.far)
        await hosted?.close()
    }

    @Test("serve's open of a store whose holder never lets go ends at once when told to stop")
    func serveOpenStops() async throws {
        let held = try HeldStore()
        defer { held.cleanUp() }
        let notes = Notes()
        let stop = Locked(false)
        let stopped = ChangeSignal()
        let opening = Task {
            try await HostedStore.open(held.access, label: "serve", output: notes.output,
                                       shouldStop: { stop.withLock { $0 } }, stopped: stopped)
        }
        #expect(await notes.waitFor("waiting for it to be free"))
        // Asleep on the holder and on the stop signal (the test's own wait, bounded).
        let asleep = ContinuousClock.now + Self.far
        while stopped.waiting == 0, ContinuousClock.now < asleep { await Task.yield() }
        #expect(stopped.waiting > 0, "the open does not wait on the stop signal")
        let start = ContinuousClock.now
        stop.withLock { $0 = true }
        stopped.signal()
        // A wait that missed the signal ends only when the test gives up on it (cancelled at `far`).
        let hosted = try await opening.bounded(by: Self.far).value
        #expect(hosted == nil)
        #expect(ContinuousClock.now - start < Self.far, "the stop signal did not end the wait")
    }

    @Test("A write to a store a one-shot hearth holds waits for it to exit and is applied here, well before its deadline")
    func writeWaitsForHolder() async throws {
        let held = try HeldStore()
        defer { held.cleanUp() }
        let request = WriteRequest(store: "com.example.held", key: "k", value: .string("v"), wait: 25, minimumPeers: 1)
        let asleep = ChangeSignal()
        let access = held.access(signalling: asleep)
        let start = ContinuousClock.now
        async let performed = request.perform(access)
        // The first try waits in the library's open (10 s at most, for the store's socket or
        // lock: that wait is the library's, not this signal's); the ones after it wait in
        // perform's watch. The holder exits once perform's watch is asleep on it.
        let waiting = await ChangeSignal.waitUntil(ContinuousClock.now + Self.far, observing: { [asleep] }) { asleep.generation > 0 }
        #expect(waiting, "perform never waited on its holder watch")
        held.kill()
        let (outcome, route) = try await performed
        #expect(outcome == .local)
        #expect(route == .here)
        // perform's deadline: 25 s + 5 s of grace.
        #expect(ContinuousClock.now - start < .seconds(25), "the write waited to its deadline: the holder's exit did not end the wait")
    }

    @Test("A write to a store a one-shot hearth holds to the end fails at its deadline with storeLocked, as before")
    func writeDeadline() async throws {
        let held = try HeldStore()
        defer { held.cleanUp() }
        let request = WriteRequest(store: "com.example.held", key: "k", value: .string("v"), wait: 7, minimumPeers: 1)
        let start = ContinuousClock.now
        do {
            _ = try await request.perform(held.access)
            Issue.record("wrote to a store another process holds")
        } catch let error as CommandError {
            #expect(error.status == .storeLocked, "\(error)")
            #expect(error.message.contains("which took no writes within 12 s; nothing was written"), "\(error.message)")
        }
        let took = ContinuousClock.now - start
        #expect(took >= .seconds(12) && took < Self.far, "\(took)")
    }
}
