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
        /// The store's replica behind the engine's gate (see ``ReplicaGate``).
        let replica: ReplicaGate
        let certificates: DeviceCertificateCache
        let options: Options
        let logger: Logger
        let metrics: SyncMetrics
        /// Whether a session is signing the pending local writes; the others then leave them to
        /// it (or sign what they send themselves), rather than wait on a lock.
        private let signing = Locked(false)
        weak let engine: SyncEngine?

        init(identity: DeviceIdentity, replica: ReplicaGate, certificates: DeviceCertificateCache,
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

        /// Signs local writes that are not signed yet, off the writer's path. Signing happens
        /// outside any lock: a session that finds another signing goes on without waiting (what
        /// it sends is signed by ``signed(_:)`` in any case).
        func signPending() throws {
            guard signing.withLock({ busy in defer { busy = true }; return !busy }) else { return }
            defer { signing.withLock { $0 = false } }
            let pending = replica.unsignedEntries()
            guard !pending.isEmpty else { return }
            let signed = try pending.map { try identity.signed($0, storeIdentifier: replica.storeIdentifier) }
            replica.attachSignatures(signed)
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

        /// What a received delta comes to once checked.
        struct Checked {
            /// Verified entries that would change the replica: to apply.
            var accepted: [Entry] = []
            /// Entries not applied, each with why: the sender is told.
            var refused: [RefusedEntry] = []
            /// The refused entries that may be acceptable later (stamped too far ahead of our
            /// clock): the vector is kept below them, so they come again.
            var heldBack: [Entry] = []
        }

        /// Checks a delta entry by entry; nothing is applied here. The certificates it carries
        /// are admitted (one that fails is logged, and the entries it would vouch for fail as
        /// unknown signers). Entries that lose to what the replica holds change nothing and are
        /// dropped unchecked (in a mesh most relayed entries are such duplicates); every other
        /// entry is verified (in parallel when there are many), and one stamped beyond the
        /// drift bound is held back. An entry that fails is refused alone.
        func check(_ delta: SyncMessage.Delta) async -> Checked {
            for der in delta.certificates {
                do {
                    let signer = try certificates.admit(derEncoded: der)
                    // Saved with the entries: we may have to vouch for them when their signer is away.
                    replica.keepCertificate(der, signer: signer.data)
                } catch {
                    logger.warning("a delta carried a device certificate that the account CA does not vouch for; the entries it signed are refused: \(error)")
                }
            }
            var checked = Checked(refused: delta.undecodable)
            // Each distinct entry is checked once: a delta that names one entry thousands of
            // times (shared objects cost the sender nothing) costs one verification.
            struct Identity: Hashable { let key: StoreKey, origin: ReplicaID, sequence: UInt64 }
            var seen = Set<Identity>()
            let distinct = delta.entries.filter { seen.insert(Identity(key: $0.key, origin: $0.origin, sequence: $0.sequence)).inserted }
            var winners: [Entry] = []
            for entry in replica.winningEntries(distinct) {
                // Only its own device may write under an origin (see ReplicaID.isBound(to:)).
                if let signer = entry.signature?.signer, !entry.origin.isBound(to: signer) {
                    checked.refused.append(RefusedEntry(entry, reason: .originMismatch, detail: "origin \(entry.origin) is not one of device \(Hex.encode(signer.prefix(4)))'s"))
                } else {
                    winners.append(entry)
                }
            }
            let failures = await verify(winners)
            let wall = replica.wallMilliseconds()
            for (entry, failure) in zip(winners, failures) {
                if let failure {
                    checked.refused.append(failure)
                } else if !HybridLogicalClock.isAcceptable(entry.timestamp, wall: wall) {
                    checked.refused.append(RefusedEntry(entry, reason: .clockAhead, detail:
                        "stamped \(entry.timestamp.date), more than \(HybridLogicalClock.maximumDrift / 3_600_000) h ahead of the receiver's clock (\(Date(timeIntervalSince1970: Double(wall) / 1000)))"))
                    checked.heldBack.append(entry)
                } else {
                    checked.accepted.append(entry)
                }
            }
            return checked
        }

        /// Verifies each entry's signature; `nil` where it verifies.
        private func verify(_ entries: [Entry]) async -> [RefusedEntry?] {
            let store = replica.storeIdentifier
            let certificates = self.certificates
            @Sendable func failure(_ entry: Entry) -> RefusedEntry? {
                do {
                    try certificates.verify(entry: entry, storeIdentifier: store)
                    return nil
                } catch let error as IdentityError where error.code == .unknownSigner {
                    return RefusedEntry(entry, reason: .unknownSigner, detail: error.description)
                } catch {
                    return RefusedEntry(entry, reason: .badSignature, detail: "\(error)")
                }
            }
            guard entries.count >= 64 else { return entries.map(failure) }
            // A full initial sync carries a thousand signatures: spread them over the cores, as
            // child tasks (never blocking the cooperative pool's threads).
            let lanes = max(1, ProcessInfo.processInfo.activeProcessorCount)
            return await withTaskGroup(of: [(Int, RefusedEntry)].self) { group in
                for lane in 0..<lanes {
                    group.addTask {
                        stride(from: lane, to: entries.count, by: lanes).compactMap { index in failure(entries[index]).map { (index, $0) } }
                    }
                }
                var results = [RefusedEntry?](repeating: nil, count: entries.count)
                for await lane in group { for (index, refused) in lane { results[index] = refused } }
                return results
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
    private let replica: ReplicaGate
    /// What peers refused of what we sent, by refusing device; pruned of entries that are
    /// no longer current.
    private let refused = Locked<[DeviceID: [SyncRefusal]]>([:])
    private let transport: PeerTransport
    private let options: Options
    private let logger: Logger
    private let certificates: DeviceCertificateCache
    private let state = Locked(State())

    public init(identity: DeviceIdentity, replica: any SyncReplica,
                options: Options = Options(), logger: Logger = Logger(label: "hearth.sync")) throws {
        self.identity = identity
        self.replica = ReplicaGate(replica)
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
    /// every current entry of this replica, but those it refused (so a process may exit without
    /// its writes being lost to the others).
    public var isSettled: Bool {
        let sessions = state.withLock { $0.sessions.count }
        return sessions > 0 && settledPeers.count == sessions
    }

    /// The connected devices that have confirmed having every current entry of this replica,
    /// but those they refused.
    public var settledPeers: [DeviceID] {
        let sessions = state.withLock { Array($0.sessions.values) }
        return sessions.filter { session in
            let refusals = self.refusals(by: session.peer.deviceID)
            return replica.syncDelta(for: session.acknowledgedVector).entries.allSatisfy { entry in
                refusals.contains { $0.entry.refers(to: entry) }
            }
        }.map(\.peer.deviceID)
    }

    // MARK: Refusals

    /// What connected or past peers refused of what this device sent, while the refused entry
    /// is still this replica's current entry of its key (a later write, or a re-stamp, ends it).
    public var refusals: [SyncRefusal] {
        prunedRefusals().values.flatMap { $0 }
    }

    func refusals(by device: DeviceID) -> [SyncRefusal] {
        prunedRefusals()[device] ?? []
    }

    private func prunedRefusals() -> [DeviceID: [SyncRefusal]] {
        let all = refused.withLock { $0 }
        guard !all.isEmpty else { return [:] }
        var current: [StoreKey: Entry?] = [:]
        let kept = all.mapValues { list in
            list.filter { refusal in
                guard let key = refusal.entry.key else { return false }
                if current[key] == nil { current[key] = .some(replica.entry(forKey: key)) }
                return current[key]!.map { refusal.entry.refers(to: $0) } ?? false
            }
        }.filter { !$0.value.isEmpty }
        refused.withLock { $0 = kept }
        return kept
    }

    /// At most this many refusals are kept per device (a peer cannot grow the list without bound).
    static let maximumRefusalsPerDevice = 1024

    /// Records what `device` refused; returns the refusals not recorded before (worth a log line).
    func note(_ refusal: SyncMessage.Refusal, from device: DeviceID) -> [SyncRefusal] {
        let now = replica.wallMilliseconds()
        let incoming = refusal.entries.map { SyncRefusal(device: device, entry: $0, peerClock: refusal.clock, localClock: now) }
        return refused.withLock { table in
            var list = table[device] ?? []
            let fresh = incoming.filter { new in !list.contains { $0.entry == new.entry } }
            list.append(contentsOf: fresh)
            table[device] = Array(list.suffix(Self.maximumRefusalsPerDevice))
            return fresh
        }
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
    ///
    /// A barrier: once it returns, no session of this engine changes the replica any more
    /// (see ``ReplicaGate``), even one that was still verifying a delta.
    public func stop() async {
        replica.close()
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
