import Foundation
import Hearth
import HearthCore
import HearthIdentity
import Logging

/// Several replicas of one store, each a separate "device" of one throwaway account, syncing
/// over 127.0.0.1: for integration tests of an app's sync behaviour, with no network, no
/// Avahi and no account of the user's touched.
///
/// Every replica has its own data and account directories in a temporary folder, listens on
/// a port of its own on 127.0.0.1, and finds the others through a static peer list (full
/// mesh). Ports stay the same across ``restart(_:clockSkew:timeout:whileClosed:)``, so a restarted replica is found again.
///
/// ```swift
/// import Hearth
/// import HearthTesting
/// import Testing
///
/// @Test func colourReachesEveryDevice() async throws {
///     let cluster = try await LoopbackCluster(replicas: 3, storeIdentifier: "com.example.colors")
///
///     try cluster[0].setValue(2, forKey: "backgroundColor")
///     try await cluster.waitUntilConverged(expected: ["backgroundColor": 2])
///
///     let change = try await cluster.nextNotification(on: 1, reason: .serverChange)
///     #expect(change.keys == ["backgroundColor"])
///     await cluster.shutdown()
/// }
/// ```
///
/// To run the app's own code against a replica, open the store with that replica's
/// configuration: in one process, stores opened on the same data directory and identifier
/// share their data, so the app's instance *is* the replica.
///
/// ```swift
/// let store = try UbiquitousKeyValueStore(storeIdentifier: cluster.storeIdentifier,
///                                         configuration: cluster.configuration(for: 1))
/// ```
public final class LoopbackCluster: Sendable {
    /// The store identifier every replica uses.
    public let storeIdentifier: String
    /// The temporary folder that holds every replica's files (removed by ``shutdown()``).
    public let rootDirectory: String
    /// Each replica's sync port on 127.0.0.1.
    public let ports: [Int]
    /// Which replicas know each other's address (every pair, by default).
    public let topology: Topology
    /// The in-memory network the replicas sync over; nil: TLS on 127.0.0.1.
    package let network: InMemoryNetwork?
    /// Each replica's device ID in the throwaway account, hex (as `SyncRefusal.device` and
    /// `hearth device list` show them).
    public let deviceIDs: [String]
    /// The throwaway account's ID, hex (as `UbiquitousKeyValueStore.accountID` shows it).
    public let accountID: String
    /// Each replica's device ID, as the sync engine holds it (``deviceIDs`` in hex).
    private let deviceIDValues: [DeviceID]
    /// The throwaway account's passphrase, which opens its CA key on every replica (to admit
    /// or remove devices in a test). The key is sealed with cheap scrypt parameters, as befits
    /// an account that lives for one test.
    public var accountPassphrase: String { Self.passphrase }
    private static let passphrase = "loopback"

    private let state: Locked<State>
    /// Signalled when a replica posts a change event (``notifications(of:)``) or is opened
    /// again: with the in-memory network's signals, what the cluster's waits follow.
    private let changes = ChangeSignal()
    /// Each replica's change events (``notifications(of:)``), across its restarts.
    private let recorder: NotificationRecorder

    private struct State {
        var configurations: [UbiquitousKeyValueStore.Configuration]
        var stores: [UbiquitousKeyValueStore]
        var isolated: Set<Int> = []
    }

    /// Starts `replicas` replicas of `storeIdentifier` and waits until each is connected to
    /// every other one and has done its initial sync (so later changes are `serverChange`).
    ///
    /// - Parameters:
    ///   - replicas: how many devices (at least 1).
    ///   - storeIdentifier: the store they share.
    ///   - topology: which replicas know each other's address (default: all of them).
    ///   - heartbeat: how often idle links are pinged; short, so a lost link is noticed fast.
    ///   - linkTimeout: how long a silent link is kept before it is dropped and redialled
    ///     (default: five heartbeats, so a replica that hangs is noticed within seconds). On a
    ///     loaded machine (tests in parallel, a sanitizer, CI beside other jobs) a replica can be
    ///     silent for seconds without being gone: give more there, up to
    ///     `SyncSettings.timeout`'s default of 90 s, unless the test is about dead links.
    ///   - writeBehindDelay: how soon writes reach each replica's file.
    ///   - connectTimeout: how long to wait for the full mesh (and each replica's initial sync)
    ///     before throwing.
    ///   - clockSkews: how far each replica's clock is off (default: none), to play devices
    ///     whose clocks are wrong; ``restart(_:clockSkew:timeout:whileClosed:)`` can set it right.
    ///   - logger: where every replica logs (default: warnings and errors to stderr, or the
    ///     level in `HEARTH_LOG_LEVEL`); a ``LogCapture``'s logger lets a test read them.
    /// - Throws: ``LoopbackClusterError`` if the replicas cannot start or connect.
    public convenience init(replicas: Int = 3, storeIdentifier: String = "com.example.app", topology: Topology = .mesh,
                            heartbeat: Duration = .milliseconds(300), linkTimeout: Duration? = nil, writeBehindDelay: Duration = .milliseconds(100),
                            connectTimeout: Duration = .seconds(15), clockSkews: [Duration]? = nil, logger: Logger? = nil) async throws {
        try await self.init(network: nil, replicas: replicas, storeIdentifier: storeIdentifier, topology: topology, heartbeat: heartbeat,
                            linkTimeout: linkTimeout, writeBehindDelay: writeBehindDelay, connectTimeout: connectTimeout,
                            clockSkews: clockSkews, logger: logger)
    }

    /// A cluster whose replicas sync over `network` (``InMemoryNetwork``: no sockets, no TLS,
    /// the same certificate checks) instead of TLS on 127.0.0.1, when it is given; for tests of
    /// the sync protocol. Its ports are the in-memory network's.
    package init(network: InMemoryNetwork?, replicas: Int = 3, storeIdentifier: String = "com.example.app", topology: Topology = .mesh,
                 heartbeat: Duration = .milliseconds(300), linkTimeout: Duration? = nil, writeBehindDelay: Duration = .milliseconds(100),
                 connectTimeout: Duration = .seconds(15), clockSkews: [Duration]? = nil, logger: Logger? = nil) async throws {
        precondition(clockSkews == nil || clockSkews?.count == replicas, "one clock skew per replica")
        precondition(replicas >= 1, "a cluster needs at least one replica")
        precondition(topology.isValid(for: replicas), "the topology links replicas the cluster does not have")
        self.topology = topology
        self.network = network
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-loopback-\(UUID().uuidString)").path
        rootDirectory = root
        self.storeIdentifier = storeIdentifier
        let ports = try network.map { network in (0..<replicas).map { _ in network.reservePort() } }
            ?? (0..<replicas).map { _ in try Self.freePort() }
        self.ports = ports

        let logger = logger ?? {
            var logger = Logger(label: "hearth.loopback")
            logger.logLevel = ProcessInfo.processInfo.environment["HEARTH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
            return logger
        }()
        // One account: created on device 0, joined by the others with a join bundle, as people do.
        // Cheap scrypt: at the standard cost, each replica would take a second and 256 MiB.
        let first = AccountStore(directory: URL(fileURLWithPath: Self.accountDirectory(0, in: root)), logger: logger, scrypt: .testing)
        let owner = try first.createAccount(displayName: "Loopback household", passphrase: Self.passphrase, deviceName: "device-0")
        let bundle = try first.exportJoinBundle(owner.account.id)
        var devices = [owner.deviceID]
        for i in 1..<replicas {
            let accounts = AccountStore(directory: URL(fileURLWithPath: Self.accountDirectory(i, in: root)), logger: logger, scrypt: .testing)
            devices.append(try accounts.importJoinBundle(bundle, passphrase: Self.passphrase, deviceName: "device-\(i)").deviceID)
        }
        deviceIDValues = devices
        deviceIDs = devices.map(\.hex)
        accountID = owner.account.id.hex

        let configurations = (0..<replicas).map { i in
            let peers = topology.neighbours(of: i, among: replicas).map { "127.0.0.1:\(ports[$0])" }
            var sync = SyncSettings(accountDirectory: Self.accountDirectory(i, in: root), discovery: .staticPeers(peers),
                                    listenHost: "127.0.0.1", port: ports[i], heartbeatInterval: heartbeat,
                                    timeout: linkTimeout ?? heartbeat * 5)
            if let network { sync.environment = network.environment() }
            var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: "\(root)/device\(i)/data",
                                                                      writeBehindDelay: writeBehindDelay, sync: sync, logger: logger)
            configuration.clockSkew = clockSkews?[i] ?? .zero
            return configuration
        }
        state = Locked(State(configurations: configurations, stores: []))
        recorder = NotificationRecorder(replicas: replicas, signal: changes)
        for i in 0..<replicas {
            let store = try open(i)
            _ = try await store.syncPort()
        }
        try await waitUntilConnected(timeout: connectTimeout)
        // Each replica's first download is posted as initialSyncChange; wait for it here, so
        // that what a test writes afterwards always arrives as serverChange. A replica linked to
        // no other (a cluster of one) has no one to download from: it never completes one.
        let linked = (0..<replicas).filter { !topology.neighbours(of: $0, among: replicas).isEmpty }
        let waiting = { linked.first { !self[$0].internals.hasCompletedInitialSync } }
        guard try await wait(for: connectTimeout, { waiting() == nil }) else {
            throw LoopbackClusterError(.timedOut, "replica \(waiting() ?? -1) did not complete its initial sync within \(connectTimeout)")
        }
    }

    /// The number of replicas.
    public var count: Int { ports.count }

    /// Replica `index`'s store (a new instance after ``restart(_:clockSkew:timeout:whileClosed:)``).
    public subscript(index: Int) -> UbiquitousKeyValueStore {
        state.withLock { $0.stores[index] }
    }

    /// Every replica's store, in order.
    public var stores: [UbiquitousKeyValueStore] { state.withLock { $0.stores } }

    /// The configuration replica `index` was opened with: open a store with it (and
    /// ``storeIdentifier``) to run app code on that replica.
    public func configuration(for index: Int) -> UbiquitousKeyValueStore.Configuration {
        state.withLock { $0.configurations[index] }
    }

    /// Replica `index`'s account directory (its device's identity and the account's
    /// certificates), the `--config-dir` of the `hearth` command: with ``accountPassphrase``, to
    /// list, admit or remove the throwaway account's devices in a test.
    public func accountDirectory(for index: Int) -> String {
        Self.accountDirectory(index, in: rootDirectory)
    }

    private static func accountDirectory(_ index: Int, in root: String) -> String { "\(root)/device\(index)/config" }

    /// Replica `index`'s device ID, as the sync engine and signatures hold it.
    package func deviceID(of index: Int) -> DeviceID {
        deviceIDValues[index]
    }

    // MARK: Writing and waiting

    /// Writes `value` (`nil` removes the key) on replica `index`.
    public func write(_ value: PropertyListValue?, forKey key: String, on index: Int) throws {
        try self[index].setValue(value, forKey: key)
    }

    /// Waits until the given replicas (default: all that are not isolated) hold the same
    /// values and, if `expected` is given, exactly those.
    ///
    /// - Throws: ``LoopbackClusterError`` naming what each replica holds, after `timeout`.
    public func waitUntilConverged(_ indices: [Int]? = nil, expected: [String: PropertyListValue]? = nil,
                                   timeout: Duration = .seconds(30)) async throws {
        let chosen = indices ?? state.withLock { s in s.stores.indices.filter { !s.isolated.contains($0) } }
        let converged = {
            let values = chosen.map { self[$0].values }
            guard let first = values.first else { return true }
            return values.allSatisfy { $0 == first } && (expected == nil || first == expected)
        }
        guard try await !wait(for: timeout, converged) else { return }
        let values = chosen.map { self[$0].values }
        let shown = zip(chosen, values).map { index, held in
            "replica \(index): " + held.keys.sorted().map { "\($0)=\(held[$0]!)" }.joined(separator: ", ")
        }
        throw LoopbackClusterError(.timedOut, "replicas did not converge within \(timeout)"
                                   + (expected.map { " on \($0)" } ?? "") + "; " + shown.joined(separator: "; ")
                                   + differences(among: chosen, values: values))
    }

    /// For a convergence that failed: ``DivergenceReport``, from the chosen replicas' states.
    private func differences(among chosen: [Int], values: [[String: PropertyListValue]]) -> String {
        DivergenceReport(chosen: chosen, values: values, states: chosen.map { self[$0].internals.replicaAndHeldBack }).text
    }

    /// Waits until every replica that is not isolated is connected to each of its neighbours in
    /// the ``topology`` that is not isolated either.
    public func waitUntilConnected(timeout: Duration = .seconds(30)) async throws {
        try await waitForPeerCounts(timeout: timeout) {
            let (stores, isolated) = state.withLock { ($0.stores, $0.isolated) }
            let expected = stores.indices.map { i in
                isolated.contains(i) ? 0 : topology.neighbours(of: i, among: stores.count).filter { !isolated.contains($0) }.count
            }
            return (stores.indices.map { isolated.contains($0) ? 0 : stores[$0].connectedPeerCount }, expected)
        }
    }

    /// Waits until replica `i` has `counts[i]` connected peers, for tests that stop and resume
    /// sync on the stores themselves rather than with ``isolate(_:)`` and ``heal(timeout:)``.
    ///
    /// - Throws: ``LoopbackClusterError`` with the counts there are, after `timeout`.
    package func waitUntilConnected(_ counts: [Int], timeout: Duration = .seconds(30)) async throws {
        precondition(counts.count == count, "one count per replica")
        try await waitForPeerCounts(timeout: timeout) { (stores.map(\.connectedPeerCount), counts) }
    }

    /// Waits until `counts` (connected peers per replica, and the counts waited for) agree.
    private func waitForPeerCounts(timeout: Duration, _ counts: () -> (connected: [Int], expected: [Int])) async throws {
        guard try await !wait(for: timeout, { let now = counts(); return now.connected == now.expected }) else { return }
        let (connected, expected) = counts()
        throw LoopbackClusterError(.timedOut, "replicas not connected within \(timeout): peers per replica \(connected), expected \(expected)")
    }

    /// Waits until `condition` holds, on the in-memory network (``init(network:replicas:storeIdentifier:topology:heartbeat:linkTimeout:writeBehindDelay:connectTimeout:clockSkews:logger:)``)
    /// checking it again at each change an engine, the network or a replica's notifications
    /// signal; throws, naming `what`, if it does not hold by `deadline` (a bound for a failure,
    /// which no test relies on).
    ///
    /// ```swift
    /// cluster[0].set("v", forKey: "k")
    /// try await cluster.until("replica 1 to apply the write") { cluster[1].string(forKey: "k") == "v" }
    /// ```
    package func until(_ what: @autoclosure () -> String, deadline: Duration = .seconds(30), _ condition: () -> Bool) async throws {
        precondition(network != nil, "until(_:deadline:_:) waits on the in-memory network's events; a cluster over TLS has none")
        guard try await wait(for: deadline, condition) else {
            throw LoopbackClusterError(.timedOut, "timed out after \(deadline) waiting for \(what())")
        }
    }

    /// Whether `condition` held within `bound` (on the in-memory network, of ``RunTime``: a
    /// stall of this process does not count; over TLS, of wall time), checked again at each
    /// change signalled by a replica's notifications and by the in-memory network or, over TLS,
    /// by each replica's sync (its engine started or stopped, a peer connected, left,
    /// acknowledged or refused: `syncSignals`): no polling on either.
    private func wait(for bound: Duration, _ condition: () -> Bool) async throws -> Bool {
        if let network {
            return await InMemoryNetwork.wait(for: bound, observing: { [changes] + network.signals }, condition)
        }
        return await ChangeSignal.waitUntil(ContinuousClock.now + bound, observing: { [changes] + stores.flatMap(\.internals.syncSignals) }, condition)
    }

    // MARK: Partitions and restarts

    /// Cuts replicas off from all the others (their sync stops; they keep working locally),
    /// until ``heal(timeout:)``.
    public func isolate(_ indices: Int...) async {
        for index in indices {
            let store = state.withLock { s -> UbiquitousKeyValueStore in
                s.isolated.insert(index)
                return s.stores[index]
            }
            await store.stopSync()
        }
    }

    /// Reconnects every isolated replica and waits until the whole cluster is connected again.
    public func heal(timeout: Duration = .seconds(30)) async throws {
        let (stores, isolated) = state.withLock { s in
            defer { s.isolated = [] }
            return (s.stores, s.isolated)
        }
        for index in isolated.sorted() {
            stores[index].resumeSync()
            _ = try await stores[index].syncPort()
        }
        try await waitUntilConnected(timeout: timeout)
    }

    /// Closes replica `index` as a quit app would (saving what it has, releasing its file) and
    /// opens it again from its file; waits until it is connected again. Its recorded
    /// notifications are kept, and new ones are added to them.
    ///
    /// - Parameters:
    ///   - index: the replica to restart.
    ///   - clockSkew: the replica's clock from now on (a clock set right, or set wrong).
    ///   - timeout: how long the replica may take to reconnect to the others.
    ///   - whileClosed: runs while the replica is down, with its data directory: to do to its
    ///     files what a tool, an older build or a damaged disk might.
    public func restart(_ index: Int, clockSkew: Duration? = nil, timeout: Duration = .seconds(30),
                        whileClosed: (_ dataDirectory: String) async throws -> Void = { _ in }) async throws {
        let old = state.withLock { s in
            s.isolated.remove(index)
            if let clockSkew { s.configurations[index].clockSkew = clockSkew }
            return s.stores[index]
        }
        recorder.stop(index)
        await old.internals.close()
        try await whileClosed(configuration(for: index).dataDirectory)
        let store = try open(index)
        _ = try await store.syncPort()
        try await waitUntilConnected(timeout: timeout)
    }

    // MARK: Notifications

    /// Every change event replica `index` has posted since the cluster started (the same
    /// events as its `didChangeExternallyNotification`s, in order).
    public func notifications(of index: Int) -> [ChangeEvent] {
        recorder.events(of: index)
    }

    /// The next change event of replica `index` with `reason` that this method has not yet
    /// returned (earlier events with other reasons are passed over), waiting up to `timeout`.
    ///
    /// - Throws: ``LoopbackClusterError`` if none comes in time.
    public func nextNotification(on index: Int, reason: ChangeReason,
                                 timeout: Duration = .seconds(30)) async throws -> ChangeEvent {
        var found: ChangeEvent?
        let next = {
            found = self.recorder.consumeNext(of: index, reason: reason)
            return found != nil
        }
        guard try await wait(for: timeout, next), let found else {
            throw LoopbackClusterError(.timedOut, "replica \(index) posted no \(reason) notification within \(timeout); it posted \(notifications(of: index))")
        }
        return found
    }

    // MARK: Shutting down

    /// Stops every replica and deletes the temporary folder. Call it at the end of each test.
    public func shutdown() async {
        let stores = state.withLock { $0.stores }
        recorder.stopAll()
        for store in stores { await store.internals.close() }
        try? FileManager.default.removeItem(atPath: rootDirectory)
    }

    // MARK: Internals

    /// Opens replica `index` and starts recording its events.
    @discardableResult
    private func open(_ index: Int) throws -> UbiquitousKeyValueStore {
        let store = try UbiquitousKeyValueStore(storeIdentifier: storeIdentifier, configuration: configuration(for: index))
        recorder.record(store, as: index)
        state.withLock { s in
            if index < s.stores.count {
                s.stores[index] = store
            } else {
                s.stores.append(store)
            }
        }
        return store
    }

    /// A TCP port on 127.0.0.1 that is free now, was never handed out before in this process,
    /// and stays out of the kernel's ephemeral range (32768–60999 on Linux).
    ///
    /// Why each rule: a port from the ephemeral range can be taken, between this call and the
    /// replica's bind, by any outgoing connection on the machine, and, for a stopped replica
    /// that restarts, for as long as that connection lives. A port handed out before belongs
    /// to a replica that may just be between a stop and a restart: the bind test would find
    /// it free, and two clusters of tests running side by side would then fight over it.
    public static func freePort() throws -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 20_000..<32_000)
            guard handedOut.withLock({ $0.insert(port).inserted }) else { continue }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw LoopbackClusterError(.setupFailed, "cannot create a socket (errno \(errno))") }
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            let bound = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            if bound { return port }
        }
        throw LoopbackClusterError(.setupFailed, "cannot find a free port on 127.0.0.1 below the ephemeral range")
    }

    /// Every port ``freePort()`` has returned (or found taken) in this process.
    private static let handedOut = Locked(Set<Int>())
}

/// Why a ``LoopbackCluster`` operation failed: a code to tell the kinds apart, and a reason
/// for people (the description) saying what each replica holds or did.
///
/// Errors are equal when their codes are, like every Hearth error.
public struct LoopbackClusterError: Error, Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What kind of failure: compare with the static members (`error.code == .timedOut`).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// The code's name.
        public var description: String { name }

        /// The replicas did not do what was awaited (connect, converge, post a notification) in time.
        public static let timedOut = Code("timedOut")
        /// The cluster could not be set up (no free port, a replica that would not open).
        public static let setupFailed = Code("setupFailed")
    }

    /// What kind of failure this is.
    public let code: Code
    /// What went wrong, for people.
    public let reason: String
    private let file: String
    private let line: UInt

    /// An error of `code`, explained by `reason`.
    public init(_ code: Code, _ reason: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    /// The reason.
    public var description: String { reason }

    /// The code, the reason and where the error was made.
    public var debugDescription: String { "LoopbackClusterError.\(code): \(reason) [\(file):\(line)]" }

    /// Equal when the codes are.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }

    /// Hashes the code.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

extension LoopbackCluster {
    /// Which replicas of a ``LoopbackCluster`` know each other's address: each replica dials
    /// its neighbours only, so entries reach the others by relay.
    ///
    /// ```swift
    /// // A – B – C: C hears of A's writes through B.
    /// let cluster = try await LoopbackCluster(replicas: 3, topology: .line)
    /// ```
    public struct Topology: Sendable, Hashable {
        private enum Shape: Sendable, Hashable {
            case mesh
            case line
            case links(Set<[Int]>)
        }

        private let shape: Shape

        /// Every replica linked to every other one.
        public static let mesh = Topology(shape: .mesh)
        /// Replica 0 linked to 1, 1 to 2, and so on.
        public static let line = Topology(shape: .line)

        /// These pairs of replicas linked, and no others.
        public static func links(_ pairs: [(Int, Int)]) -> Topology {
            Topology(shape: .links(Set(pairs.map { [min($0.0, $0.1), max($0.0, $0.1)] })))
        }

        /// The replicas `index` is linked to, in a cluster of `count`.
        func neighbours(of index: Int, among count: Int) -> [Int] {
            switch shape {
            case .mesh: (0..<count).filter { $0 != index }
            case .line: [index - 1, index + 1].filter { (0..<count).contains($0) }
            case .links(let pairs): (0..<count).filter { pairs.contains([min(index, $0), max(index, $0)]) }
            }
        }

        /// Whether every link names two different replicas of a cluster of `count`.
        func isValid(for count: Int) -> Bool {
            guard case .links(let pairs) = shape else { return true }
            return pairs.allSatisfy { $0[0] != $0[1] && (0..<count).contains($0[0]) && (0..<count).contains($0[1]) }
        }
    }
}
