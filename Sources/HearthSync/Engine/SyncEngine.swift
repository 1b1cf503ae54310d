import Dispatch
import Foundation
import HearthCore
import HearthDiscovery
import HearthIdentity
import HearthTransport
import Logging
import NIOCore

/// Keeps the stores of one device identity in sync with the other devices of the account:
/// one listener, one discovery publication and one connection per peer device, carrying
/// every store both devices serve (protocol 3, docs/protocol.md).
///
/// ```swift
/// let engine = try SyncEngine(identity: identity)
/// let notes = try engine.attach(notesReplica)   // stores come and go while it runs
/// let port = try await engine.start()
/// engine.follow(discovery)
/// // … every local write is pushed at once; what peers send is applied and posted.
/// await engine.stop()
/// ```
///
/// At most one connection per peer device is kept: when two devices dial each other at
/// once, both keep the connection dialled by the device with the smaller ID. A message about a
/// store this device does not serve is ignored, unless ``storeProvider`` supplies the store
/// (an always-on device keeping stores it never opened).
package final class SyncEngine: Sendable {
    /// How an engine listens, beats and backs off (``SyncEngineOptions``).
    package typealias Options = SyncEngineOptions

    struct State: ~Copyable {
        /// One session per peer device (``Routing``: the duplicate rule, whom an event goes to).
        var sessions = Routing<SyncSession>()
        var listener: (any PeerLinkListener)?
        var tasks: [Task<Void, Never>] = []
        /// Ticks every session's heartbeat (``EngineSessions``).
        var heartbeat: Task<Void, Never>?
        var acceptor: Task<Void, Never>?
        var discoveries: [any PeerDiscovery] = []
        var stopped = false
        /// What the engine's owner asked to run at ``stop()`` (``whenStopped(_:)``).
        var onStop: [@Sendable () -> Void] = []
    }

    typealias Context = EngineContext
    /// What the engine and its sessions share, made once: the identity it started with, its
    /// options, its logger, its counters.
    let context: Context
    package var identity: DeviceIdentity { context.identity }
    /// The devices removed from the account (shared with the TLS layer and, in an app, with
    /// every engine of the process): refused in handshakes, their later entries refused,
    /// relayed to every peer.
    package let removals: DeviceRemovals
    /// The devices of the account met here (peers as they connect and leave, signers of relayed
    /// entries); nil when the owner keeps no such list.
    package let devices: KnownDevices?
    package var metrics: SyncMetrics { context.metrics }
    /// Where links come from: TLS over TCP, or a test's in-memory network (``SyncEnvironment``).
    let network: any PeerNetwork
    var options: Options { context.options }
    var logger: Logger { context.logger }
    let certificates: DeviceCertificateCache
    /// Keeps a connection up to each peer discovery reports (``PeerDialler``).
    let dialler = PeerDialler()
    /// Removals learned, and what each session does about them (``RemovalCoordinator``).
    let removalCoordinator: RemovalCoordinator
    /// Renewals of this device's certificate and its peers' (``CertificateRenewal``).
    let renewal: CertificateRenewal
    let state: Locked<State>
    /// The attached stores (``EngineStores``).
    let attachedStores = EngineStores()
    /// The sessions: admitted, routed to, ticked (``EngineSessions``).
    let sessionTable: EngineSessions
    /// Signalled when a session comes or goes and after each message a session handled (an
    /// ack, a refusal, a store it shares): what a caller waiting for peers to connect or to
    /// confirm having every write re-checks (``SyncStore/isSettled``), without polling.
    package let changes = ChangeSignal()

    /// The shortest heartbeat interval an engine uses (a shorter one is raised to it).
    package static var minimumHeartbeatInterval: Duration { .milliseconds(250) }

    /// An engine serving no store yet (see ``attach(_:)``).
    ///
    /// - Parameter removals: the account's device removals (``AccountStore/removals(of:)``
    ///   keeps them on disk); by default an empty set in memory, which peers can still teach.
    /// - Parameter environment: the clocks, randomness and network (the system's and TLS over
    ///   TCP by default; a test's own to run engines in memory, ``SyncEnvironment``).
    package init(identity: DeviceIdentity, options: Options = Options(), removals: DeviceRemovals? = nil,
                devices: KnownDevices? = nil, environment: SyncEnvironment = .system, logger: Logger) throws {
        state = Locked(State())
        var logger = logger
        logger[metadataKey: "device"] = "\(identity.deviceID.short)"
        // Peers read at most 10 pings and pongs a second (SessionState.heartbeatSpacing): with
        // pings up to a tenth early and a pong for each of theirs, 250 ms stays below that.
        var options = options
        options.heartbeatInterval = max(options.heartbeatInterval, Self.minimumHeartbeatInterval)
        context = Context(identity: identity, options: options, logger: logger, metrics: SyncMetrics(clock: environment.clock),
                          clock: environment.clock, random: environment.random)
        let removals = removals ?? DeviceRemovals(trust: identity.account.trust, logger: logger)
        precondition(removals.trust.accountID == identity.account.id, "the removals are another account's")
        self.removals = removals
        self.devices = devices
        // A removed device that dials us is handed its signed removal record (and nothing
        // else): the record, never a bare TLS alert, is what tells a device it was removed.
        network = try environment.network(PeerNetworkSetup(identity: identity, removals: removals, removalNotice: { [removals] device in
            guard let record = removals.removal(of: device), let payload = try? SyncMessage.removals([record]).encoded() else { return nil }
            return Frame.encode(payload)
        }, logger: logger))
        certificates = DeviceCertificateCache(trust: identity.account.trust, removals: removals, signatures: identity.signatures)
        _ = try? certificates.admit(identity.certificate)
        removalCoordinator = RemovalCoordinator(removals: removals, context: context, stores: { [attachedStores] in attachedStores.all }) { [state] in
            state.withLock { $0.sessions.sessions }
        }
        renewal = CertificateRenewal(identity: identity, context: context, network: network, certificates: certificates)
        sessionTable = EngineSessions(state: state, context: context, removals: removals, devices: devices, dialler: dialler, changes: changes)
        environment.observeChanges?(changes)
    }

    /// An engine serving `replica`'s store (more can be attached).
    package convenience init(identity: DeviceIdentity, replica: any SyncReplica,
                            options: Options = Options(), removals: DeviceRemovals? = nil,
                            environment: SyncEnvironment = .system, logger: Logger) throws {
        try self.init(identity: identity, options: options, removals: removals, environment: environment, logger: logger)
        try attach(replica)
    }

    /// Starts listening and following discovery. Returns the port peers connect to.
    @discardableResult
    package func start() async throws -> Int {
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
        // Not cancelled by stop(): the stream ends when the listener closes, after handing over
        // the connections already accepted, which are then closed here rather than left open.
        let accepting = Task { [weak self] in
            await withDiscardingTaskGroup { group in
                await listener.forEachLink { link in
                    guard let self, !self.isStopped else { await link.close(); return }
                    group.addTask { _ = await self.runSession(link, initiatedLocally: false) }
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
    private func listen() async throws -> any PeerLinkListener {
        var attempt = 0
        while true {
            do {
                return try await network.listenForLinks(host: options.host, port: options.port)
            } catch {
                attempt += 1
                // Stopped meanwhile: not a failure to report.
                if isStopped { throw CancellationError() }
                // A local cause (EACCES for a port below 1024, no descriptors) will not pass
                // by waiting: say so at once.
                guard options.port != 0, attempt < 20, LocalFailure.cause(of: error) == nil else { throw error }
                logger.debug("cannot listen on port \(options.port) yet (\(error)); retrying")
                try await context.clock.sleep(.milliseconds(100 * min(attempt, 5)))
            }
        }
    }

    /// Dials the peers `discovery` reports, for as long as they are reported.
    package func follow(_ discovery: any PeerDiscovery) {
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
                self.dialler.handle(event, for: self)
            }
        }
        state.withLock { $0.tasks.append(following) }
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    /// The port the engine listens on, once started.
    package var port: Int? { state.withLock { $0.listener?.port } }

    /// The peers discovery reports right now, connected or not.
    package var discoveredPeers: [DiscoveredPeer] {
        state.withLock { $0.discoveries }.flatMap(\.peers)
    }

    /// The devices connected right now.
    package var connectedPeers: [DeviceID] { sessionTable.connectedPeers }

    /// Dials `host:port` and keeps the connection up (reconnecting with back-off) until
    /// ``stop()``; for peers known by address rather than discovery.
    package func addPeer(host: String, port: Int) {
        let peer = DiscoveredPeer(id: "manual:\(host):\(port)", name: "\(host):\(port)",
                                  addresses: [PeerAddress(host: host, family: host.contains(":") ? .ipv6 : .ipv4)],
                                  port: UInt16(port))
        dialler.handle(.appeared(peer), for: self)
    }

    /// Runs `body` at ``stop()`` (at once if stopped already): what the owner set up for this
    /// engine ends with it (``SyncSetup``'s watch on the account's `removals` file).
    package func whenStopped(_ body: @escaping @Sendable () -> Void) {
        if state.withLock({ s in s.stopped ? true : { s.onStop.append(body); return false }() }) { body() }
    }

    /// Stops dialling, closes every connection and the listener.
    ///
    /// A barrier: once it returns, no session of this engine changes the replica of any of its
    /// stores (see ``ReplicaGate``), even one that was still verifying a delta.
    package func stop() async {
        let (listener, tasks, sessions, discoveries, onStop) = state.withLock { s in
            s.stopped = true
            defer { s.tasks = []; s.discoveries = []; s.heartbeat = nil; s.onStop = [] }
            return (s.listener, s.tasks + (s.heartbeat.map { [$0] } ?? []), s.sessions.removeAll(), s.discoveries, s.onStop)
        }
        let stores = attachedStores.closeAll()
        for dialer in dialler.stop() { dialer.cancel() }
        removalCoordinator.stop()
        for body in onStop { body() }
        for store in stores { store.replica.close() }
        logger.debug("stopping: \(tasks.count) tasks, \(sessions.count) sessions")
        for task in tasks { task.cancel() }
        for session in sessions { session.close() }
        for discovery in discoveries { await discovery.stop() }
        await listener?.close()
        changes.signal()
        logger.debug("stopped")
    }

    // MARK: Sessions (``EngineSessions``)

    /// Sends every connected peer what it lacks of every store, now (local writes and applied
    /// deltas already do).
    package func pushNow() {
        for store in attachedStores.identifiers { changed(store) }
    }

    func changed(_ store: String) { sessionTable.changed(store) }
    func route(_ effects: [RelayEffect], from device: DeviceID, in store: SyncStore) { sessionTable.route(effects, from: device, in: store) }
    func linkedDevices(except device: DeviceID) -> [DeviceID] { sessionTable.linkedDevices(except: device) }
    func sharers(of store: String) -> Set<DeviceID> { sessionTable.sharers(of: store) }
    func left(_ store: String, by device: DeviceID) { sessionTable.left(store, by: device) }
    enum Registration { case accepted, duplicate, removed }
    func register(_ session: SyncSession) -> Registration { sessionTable.register(session) }
    func unregister(_ session: SyncSession) { sessionTable.unregister(session) }
    func hasSession(with device: DeviceID) -> Bool { sessionTable.hasSession(with: device) }

    func runSession(_ link: any PeerLink, initiatedLocally: Bool) async -> SyncSession.Outcome {
        guard link.peer.deviceID != identity.deviceID else {
            logger.debug("connected to ourselves; closing")
            await link.close()
            return .duplicate
        }
        let session = SyncSession(link: link, initiatedLocally: initiatedLocally, context: context, engine: self)
        return await session.run(link)
    }
}
