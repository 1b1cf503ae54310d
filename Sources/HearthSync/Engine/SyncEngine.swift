import Dispatch
import Foundation
import HearthCore
import HearthDiscovery
import HearthIdentity
import HearthTransport
import Logging
import NIOCore

/// Keeps one store's replica in sync with the other devices of the account: listens for
/// peers, dials the ones discovery finds, and runs the sync protocol on each connection.
///
/// ```swift
/// let engine = try SyncEngine(identity: identity, replica: backend)
/// let port = try await engine.start()
/// engine.follow(discovery)
/// // … every local write is pushed at once; what peers send is applied and posted.
/// await engine.stop()
/// ```
///
/// At most one connection per peer device is kept: when two devices dial each other at
/// once, both keep the connection dialled by the device with the smaller ID.
public final class SyncEngine: Sendable {
    public struct Options: Sendable {
        /// Where to listen (default: every interface, a free port).
        public var host: String
        public var port: Int
        /// How often to ping an idle link, and how long a silent link lives.
        public var heartbeatInterval: Duration
        public var timeout: Duration
        /// Reconnect back-off bounds (each wait is jittered by ±50 %).
        public var minimumBackoff: Duration
        public var maximumBackoff: Duration

        public init(host: String = "0.0.0.0", port: Int = 0, heartbeatInterval: Duration = .seconds(5),
                    timeout: Duration = .seconds(15), minimumBackoff: Duration = .milliseconds(200),
                    maximumBackoff: Duration = .seconds(10)) {
            self.host = host
            self.port = port
            self.heartbeatInterval = heartbeatInterval
            self.timeout = timeout
            self.minimumBackoff = minimumBackoff
            self.maximumBackoff = maximumBackoff
        }
    }

    /// What sessions share: who we are, what we sync, how we verify.
    final class Context: Sendable {
        let identity: DeviceIdentity
        let replica: any SyncReplica
        let certificates: DeviceCertificateCache
        let options: Options
        let logger: Logger
        let metrics: SyncMetrics
        /// Serialises signing; counts the rounds (a lock around nothing would be a zero-sized
        /// value, on which ThreadSanitizer reports false races).
        private let signing = Locked(0)
        weak let engine: SyncEngine?

        init(identity: DeviceIdentity, replica: any SyncReplica, certificates: DeviceCertificateCache,
             options: Options, logger: Logger, metrics: SyncMetrics, engine: SyncEngine) {
            self.identity = identity
            self.replica = replica
            self.certificates = certificates
            self.options = options
            self.logger = logger
            self.metrics = metrics
            self.engine = engine
        }

        func makeHello() throws -> SyncMessage.Hello {
            var hello = SyncMessage.Hello(protocolVersion: SyncMessage.protocolVersion, account: identity.account.id.hex,
                                          store: replica.storeIdentifier, device: identity.deviceID.data,
                                          vector: replica.syncVector, signature: Data(),
                                          peersDigest: peersDigest)
            hello.signature = Data(try identity.privateKey.signature(for: hello.signingBytes))
            return hello
        }

        /// The other devices this replica knows of, as 32-byte IDs.
        var knownDevices: [Data] {
            replica.knownDevices.compactMap { Hex.decode($0).map { Data($0) } }.filter { $0 != identity.deviceID.data }
        }

        /// The digest of what this replica knows of the household, itself included: what a
        /// hello carries, and what a peer's hello is compared with.
        var peersDigest: Data {
            SyncMessage.peersDigest(knownDevices + [identity.deviceID.data])
        }

        /// Signs local writes that are not signed yet, once, off the writer's path.
        func signPending() throws {
            try signing.withLock { rounds in
                rounds &+= 1
                let pending = replica.unsignedEntries()
                guard !pending.isEmpty else { return }
                let signed = try pending.map { try identity.signed($0, storeIdentifier: replica.storeIdentifier) }
                replica.attachSignatures(signed)
            }
        }

        /// `entries` with any unsigned ones signed (and their signatures kept in the replica).
        func signed(_ entries: [Entry]) throws -> [Entry] {
            guard entries.contains(where: { $0.signature == nil }) else { return entries }
            let result = try entries.map { $0.signature == nil ? try identity.signed($0, storeIdentifier: replica.storeIdentifier) : $0 }
            replica.attachSignatures(result.filter { entry in !entries.contains { $0.key == entry.key && $0.signature != nil } })
            return result
        }

        /// The DER certificates of the devices that signed `entries`, but ours (the peer has it
        /// from the TLS handshake) and those in `excluding` (sent on this connection before).
        func certificates(for entries: [Entry], excluding sent: Set<Data>) -> [Data] {
            let signers = Set(entries.compactMap { $0.signature?.signer })
            return signers.compactMap { signer -> Data? in
                guard signer != identity.deviceID.data, let device = DeviceID(bytes: signer),
                      let certificate = certificates.certificate(for: device) else { return nil }
                let der = Data(certificate.derEncoded)
                return sent.contains(der) ? nil : der
            }
        }

        /// Checks a delta before anything of it is applied: the certificates it carries, the
        /// cheap bounds of every entry, and the signature of every entry in `winners` (the
        /// ones that would be applied), in parallel when there are many.
        func verify(_ delta: SyncMessage.Delta, applying winners: [Entry]) async throws {
            for der in delta.certificates {
                let signer = try certificates.admit(derEncoded: der)
                // Saved with the entries: we may have to vouch for them when their signer is away.
                replica.keepCertificate(der, signer: signer.data)
            }
            let wall = replica.wallMilliseconds()
            for entry in delta.entries {
                guard entry.key.utf8.count <= 64 else { throw SyncProtocolError("entry key longer than 64 bytes") }
                guard entry.quotaSize <= 1_048_576 else { throw SyncProtocolError("entry \(entry.key) exceeds the per-value quota") }
                guard HybridLogicalClock.isAcceptable(entry.timestamp, wall: wall) else {
                    throw SyncProtocolError("entry \(entry.key) is stamped \(entry.timestamp.date), more than \(HybridLogicalClock.maximumDrift / 3_600_000) h ahead of our clock")
                }
            }
            let store = replica.storeIdentifier
            guard winners.count >= 64 else {
                for entry in winners { try certificates.verify(entry: entry, storeIdentifier: store) }
                return
            }
            // A full initial sync carries a thousand signatures: spread them over the cores, as
            // child tasks (never blocking the cooperative pool's threads).
            let lanes = max(1, ProcessInfo.processInfo.activeProcessorCount)
            let certificates = self.certificates
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<lanes {
                    group.addTask {
                        for index in stride(from: lane, to: winners.count, by: lanes) {
                            try certificates.verify(entry: winners[index], storeIdentifier: store)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    private struct State: ~Copyable {
        var sessions: [DeviceID: SyncSession] = [:]
        var listener: PeerListener?
        var tasks: [Task<Void, Never>] = []
        var acceptor: Task<Void, Never>?
        var discoveries: [any PeerDiscovery] = []
        var dialers: [String: Task<Void, Never>] = [:]
        var knownDevices: [String: DeviceID] = [:]
        var stopped = false
    }

    public let identity: DeviceIdentity
    public let metrics = SyncMetrics()
    private let replica: any SyncReplica
    private let transport: PeerTransport
    private let options: Options
    private let logger: Logger
    private let certificates: DeviceCertificateCache
    private let state = Locked(State())

    public init(identity: DeviceIdentity, replica: any SyncReplica,
                options: Options = Options(), logger: Logger = Logger(label: "hearth.sync")) throws {
        self.identity = identity
        self.replica = replica
        self.options = options
        var logger = logger
        logger[metadataKey: "store"] = "\(replica.storeIdentifier)"
        logger[metadataKey: "device"] = "\(identity.deviceID.short)"
        self.logger = logger
        transport = try PeerTransport(identity: identity, logger: logger)
        certificates = DeviceCertificateCache(trust: identity.account.trust)
        _ = try? certificates.admit(identity.certificate)
        // The certificates saved with the replica: this run can relay entries of devices it
        // has not met (yet), as the run that received them could. Each is checked again.
        for (signer, der) in replica.signerCertificates {
            do {
                try certificates.admit(derEncoded: der)
            } catch {
                logger.warning("ignoring the saved certificate of device \(Hex.encode(signer.prefix(4))): \(error)")
            }
        }
    }

    private var context: Context {
        Context(identity: identity, replica: replica, certificates: certificates, options: options,
                logger: logger, metrics: metrics, engine: self)
    }

    /// Starts listening and following discovery. Returns the port peers connect to.
    @discardableResult
    public func start() async throws -> Int {
        let listener = try await listen()
        // stop() may have run while we were binding: then this listener must not outlive it.
        // Checked and stored in one step, or a stop() in between would miss the listener and
        // leave it holding the port for good (the next start could then never bind).
        let kept = state.withLock { s -> Bool in
            guard !s.stopped else { return false }
            s.listener = listener
            return true
        }
        guard kept else {
            await listener.close()
            throw CancellationError()
        }
        let context = self.context
        replica.onLocalChange { [weak self] in self?.changed() }
        // Not cancelled by stop(): the stream ends when the listener closes, after handing over
        // the connections already accepted, which are then closed here rather than left open.
        let accepting = Task { [weak self] in
            await withDiscardingTaskGroup { group in
                for await connection in listener.connections {
                    guard let self, !self.isStopped else { await connection.close(); continue }
                    group.addTask { _ = await self.runSession(connection, initiatedLocally: false, context: context) }
                }
            }
        }
        let orphaned = state.withLock { s -> Bool in
            guard !s.stopped else { return true }
            s.acceptor = accepting
            return false
        }
        // A stop() since the listener was stored has closed it, which ends this task's loop.
        if orphaned { accepting.cancel() }
        logger.info("sync listening", metadata: ["port": "\(listener.port ?? -1)"])
        return listener.port ?? options.port
    }

    /// Binds the listener, retrying for a few seconds: a fixed port may still be held by
    /// the listener of a previous run that is closing.
    private func listen() async throws -> PeerListener {
        var attempt = 0
        while true {
            do {
                return try await transport.listen(host: options.host, port: options.port)
            } catch {
                attempt += 1
                // Stopped meanwhile: not a failure to report.
                if isStopped { throw CancellationError() }
                guard options.port != 0, attempt < 20 else { throw error }
                logger.debug("cannot listen on port \(options.port) yet (\(error)); retrying")
                try await Task.sleep(for: .milliseconds(100 * min(attempt, 5)))
            }
        }
    }

    /// Dials the peers `discovery` reports, for as long as they are reported.
    public func follow(_ discovery: any PeerDiscovery) {
        let context = self.context
        let accepted = state.withLock { s -> Bool in
            guard !s.stopped else { return false }
            s.discoveries.append(discovery)
            return true
        }
        guard accepted else {
            Task { await discovery.stop() }
            return
        }
        let following = Task { [weak self] in
            for await event in discovery.events() {
                guard let self else { return }
                self.handle(event, context: context)
            }
        }
        state.withLock { $0.tasks.append(following) }
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    /// The port the engine listens on, once started.
    public var port: Int? { state.withLock { $0.listener?.port } }

    /// The peers discovery reports right now, connected or not.
    public var discoveredPeers: [DiscoveredPeer] {
        state.withLock { $0.discoveries }.flatMap(\.peers)
    }

    /// The devices connected right now.
    public var connectedPeers: [DeviceID] { state.withLock { Array($0.sessions.keys) } }

    /// Whether at least one peer is connected and every connected peer has confirmed having
    /// everything this replica has (so a process may exit without its writes being lost to
    /// the others).
    public var isSettled: Bool {
        let vector = replica.syncVector
        let sessions = state.withLock { Array($0.sessions.values) }
        return !sessions.isEmpty && sessions.allSatisfy { $0.hasAcknowledged(vector) }
    }

    /// Dials `host:port` and keeps the connection up (reconnecting with back-off) until
    /// ``stop()``; for peers known by address rather than discovery.
    public func addPeer(host: String, port: Int) {
        let peer = DiscoveredPeer(id: "manual:\(host):\(port)", name: "\(host):\(port)",
                                  addresses: [PeerAddress(host: host, family: host.contains(":") ? .ipv6 : .ipv4)],
                                  port: UInt16(port))
        handle(.appeared(peer), context: context)
    }

    /// Stops dialling, closes every connection and the listener.
    public func stop() async {
        let (listener, tasks, sessions, discoveries) = state.withLock { s in
            s.stopped = true
            defer { s.tasks = []; s.dialers = [:]; s.sessions = [:]; s.discoveries = [] }
            return (s.listener, s.tasks + Array(s.dialers.values), Array(s.sessions.values), s.discoveries)
        }
        logger.debug("stopping: \(tasks.count) tasks, \(sessions.count) sessions")
        for task in tasks { task.cancel() }
        for session in sessions { session.close() }
        for discovery in discoveries { await discovery.stop() }
        await listener?.close()
        logger.debug("stopped")
    }

    // MARK: Sessions

    /// Sends every connected peer what it lacks, now (`synchronize()` calls it; local writes
    /// and applied deltas already do).
    public func pushNow() { changed() }

    /// Pushes to every connected peer (after a local write, or to relay what one peer sent).
    func changed() {
        let sessions = state.withLock { Array($0.sessions.values) }
        for session in sessions { session.push() }
    }

    /// Admits a session after its hello; refuses a duplicate (see the type's documentation).
    func register(_ session: SyncSession) -> Bool {
        enum Decision { case accept(replacing: SyncSession?), reject }
        let decision: Decision = state.withLock { s in
            guard !s.stopped else { return .reject }
            let device = session.peer.deviceID
            guard let existing = s.sessions[device] else {
                s.sessions[device] = session
                return .accept(replacing: nil)
            }
            // Both ends apply the same rule to the same pair, so they keep the same connection:
            // the one dialled by the smaller device ID; between two dialled by the same device, the newer.
            guard session.initiator <= existing.initiator else { return .reject }
            s.sessions[device] = session
            return .accept(replacing: existing)
        }
        switch decision {
        case .accept(let replaced):
            replaced?.close()
            return true
        case .reject:
            return false
        }
    }

    func unregister(_ session: SyncSession) {
        state.withLock { s in
            if s.sessions[session.peer.deviceID] === session { s.sessions[session.peer.deviceID] = nil }
        }
    }

    private func runSession(_ connection: PeerConnection, initiatedLocally: Bool, context: Context) async -> SyncSession.Outcome {
        guard connection.peer.deviceID != identity.deviceID else {
            logger.debug("connected to ourselves; closing")
            await connection.close()
            return .duplicate
        }
        let session = SyncSession(peer: connection.peer, initiatedLocally: initiatedLocally, context: context)
        return await session.run(connection)
    }

    // MARK: Dialling

    private func handle(_ event: PeerEvent, context: Context) {
        switch event {
        case .appeared(let peer), .updated(let peer):
            state.withLock { s in
                guard !s.stopped, s.dialers[peer.id] == nil else { return }
                s.dialers[peer.id] = Task { [weak self] in await self?.dial(peer, context: context) }
            }
        case .gone(let peer):
            state.withLock { $0.dialers.removeValue(forKey: peer.id) }?.cancel()
        }
    }

    /// Keeps a connection to `peer` up: connect, run, and after a failure wait a jittered,
    /// doubling back-off before trying again. Waits while another connection to the same
    /// device is up (it may have dialled us).
    private func dial(_ peer: DiscoveredPeer, context: Context) async {
        var backoff = options.minimumBackoff
        while !Task.isCancelled {
            if let device = state.withLock({ $0.knownDevices[peer.id] }), state.withLock({ $0.sessions[device] != nil }) {
                try? await Task.sleep(for: .milliseconds(500))
                continue
            }
            var connected = false
            for address in peer.addresses.sorted() where !Task.isCancelled {
                do {
                    let connection = try await transport.connect(host: address.connectHost, port: Int(peer.port))
                    connected = true
                    backoff = options.minimumBackoff
                    if connection.peer.deviceID == identity.deviceID {
                        logger.debug("\(peer.name) is this device; not dialling it")
                        await connection.close()
                        return
                    }
                    state.withLock { $0.knownDevices[peer.id] = connection.peer.deviceID }
                    _ = await runSession(connection, initiatedLocally: true, context: context)
                    break
                } catch {
                    logger.debug("could not connect to \(peer.name) at \(address): \(error)")
                }
            }
            let jitter = Double.random(in: 0.5...1.5)
            try? await Task.sleep(for: (connected ? options.minimumBackoff : backoff) * jitter)
            if !connected { backoff = min(backoff * 2, options.maximumBackoff) }
        }
    }
}
