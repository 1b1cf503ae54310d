import Foundation
import HearthCore
import HearthIdentity
import HearthTransport
import Logging
import NIOCore

/// One authenticated connection to a peer device running the sync protocol (docs/protocol.md)
/// for every store both devices serve: hello both ways, then per shared store the state each
/// side lacks, each side's delta of what the other lacks, pushes as changes happen,
/// acknowledgements; heartbeats for the connection as a whole.
///
/// The protocol itself is values (``SessionState``, ``HelloCheck``, ``DeltaPlan``); this is their
/// I/O shell. It keeps the state under one lock, reads the replicas and applies the state's
/// effects to them outside it (a replica takes its own lock), and runs three tasks on the
/// connection: a reader (verifies and applies what arrives), a writer (``SessionWriter``), and
/// a hello timeout. The first to end ends the session.
final class SyncSession: Sendable {
    typealias Outcome = SessionOutcome
    typealias State = SessionState<SyncStore>

    let peer: TLSPeer
    /// The device that dialled this connection (for the duplicate rule).
    let initiator: DeviceID
    let context: SyncEngine.Context
    /// The engine this session belongs to (weak: a session never keeps a stopped engine alive).
    weak let engine: SyncEngine?
    /// The protocol's state: everything this connection knows and owes.
    let state: Locked<State>
    /// Wakes the writer; holds at most one wake-up (the state's mailbox holds what to send).
    private let wakeUp: AsyncStream<Void>.Continuation
    let wakeUps: AsyncStream<Void>
    /// Closes the link: the way to stop the reader, which waits on it.
    private let closeChannel = Locked<(@Sendable () -> Void)?>(nil)
    let logger: Logger

    init(peer: TLSPeer, initiatedLocally: Bool, context: SyncEngine.Context, engine: SyncEngine) {
        self.peer = peer
        initiator = initiatedLocally ? context.identity.deviceID : peer.deviceID
        state = Locked(State(now: context.clock.now(), dialled: initiatedLocally))
        self.context = context
        self.engine = engine
        (wakeUps, wakeUp) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        var logger = context.logger
        logger[metadataKey: "peer"] = "\(peer)"
        self.logger = logger
    }

    /// Both ends serve `store` on this connection: ours is open here, and the peer listed it in
    /// its hello or sent its state since (a store we announced and it ignores is not shared).
    func shares(_ store: String) -> Bool { state.withLock { $0.shares(store) } }

    /// What the peer has confirmed having of `store`; `nil` if this connection does not sync it.
    func acknowledgedVector(of store: String) -> VersionVector? {
        state.withLock { $0.shared[store]?.acknowledged }
    }

    /// Asks the writer to send every removal we know (we learned one since the hellos).
    func relayRemovals() {
        update { $0.relayRemovals() }
    }

    /// Asks the peer for its whole `store`, if shared here (``SessionState/askForWhole(_:)``).
    func askForWhole(_ store: SyncStore) {
        update { $0.askForWhole(store.identifier) }
    }

    /// Sends the peer the removals that name it, then closes; closes at once if it cannot be
    /// told (an older build), and in any case within a second (a peer that does not read).
    func expel() {
        guard update({ $0.expel() }) else { close(); return }
        Task { [weak self] in
            try? await self?.context.clock.sleep(.seconds(1))
            self?.close()
        }
    }

    /// Asks the peer for a renewed certificate, once per connection, if ours is within its
    /// renewal window and the peer understands renewals.
    func askForRenewalIfDue() {
        guard let engine, engine.renewal.isDue else { return }
        update { $0.askForRenewal() }
    }

    /// If the peer is linked to one of `writers` (device prefixes), sends it our vector of
    /// `store` after `delay` (one `store` message however many changes meanwhile).
    func tellVectorSoon(of store: String, ifLinkedTo writers: Set<UInt64>, after delay: Duration) {
        guard state.withLock({ $0.tellVectorSoon(of: store, ifLinkedTo: writers) }) else { return }
        Task { [weak self] in
            try? await self?.context.clock.sleep(delay)
            self?.update { $0.vectorTellDue(of: store) }
        }
    }

    /// Asks the writer to send whatever the peer lacks of `store` now.
    func push(_ store: String) {
        update { s in
            guard s.shares(store) else { return }
            s.mailbox.post(store) { $0.delta = true }
        }
    }

    /// Changes the state and wakes the writer (the change may have posted something to send).
    @discardableResult
    func update<T>(_ change: (inout State) -> T) -> T {
        let result = state.withLock(change)
        wakeUp.yield()
        return result
    }

    /// Wakes the writer (something was posted to the state's mailbox).
    func wake() { wakeUp.yield() }

    /// Records what to send and wakes the writer.
    func post(_ change: (inout SessionMailbox) -> Void) {
        update { change(&$0.mailbox) }
    }

    /// Ends the session (its connection closes).
    func close() {
        state.withLock { $0.closed = true }
        wakeUp.finish()
        closeChannel.withLock { $0 }?()
    }

    func fail(_ error: any Error) {
        if !state.withLock({ $0.closed }) { logger.notice("closing the connection: \(error)") }
        closeChannel.withLock { $0 }?()
    }

    // MARK: Stores coming and going

    /// Starts syncing `store` on this connection, as the peer's hello listed it.
    func open(_ store: SyncStore, as listed: SyncMessage.Hello.Store) {
        let (ours, vector) = store.announcement()
        let view = State.ReplicaView(vector: vector, awaitingInitialSync: store.replica.awaitingInitialSync, wantsWhole: store.wantsWhole)
        let effects = update { $0.open(store, named: store.identifier, listed: listed, ours: ours, view: view) }
        store.perform(effects, for: peer)
    }

    /// Starts syncing `store`, attached on this device since the hellos: the peer is told our
    /// vector and, if it serves the store (or its store provider takes it up, as a device
    /// daemon's does), answers with its own; deltas wait for that answer. A peer that serves
    /// it not ignores the message, as it would have ignored the store in our hello.
    func announce(_ store: SyncStore) {
        // First: the peer's answer may come as soon as our state is posted.
        store.keep(peerCertificate: peer.certificate, of: peer.deviceID)
        let whole = store.wantsWhole
        guard let replay = update({ $0.announce(store, named: store.identifier, wantsWhole: whole) }) else { return }
        // The peer told its state before this device had the store: it counts as its answer.
        if let replay { receive(replay) }
    }

    /// Stops syncing `store` (detached on this device) and tells the peer.
    func leave(_ store: String) {
        update { $0.leave(store) }
    }

    // MARK: Running

    func run<Link: PeerLink>(_ link: Link) async -> Outcome {
        closeChannel.withLock { $0 = { link.closeSoon() } }
        do {
            if let eventLoop = link.eventLoop {
                // On the connection's event loop: a frame resumes the reader, and the writer's bytes
                // reach the channel, without a hand-off between threads (EventLoopTaskExecutor).
                return try await withTaskExecutorPreference(EventLoopTaskExecutor(eventLoop)) {
                    try await exchange(link)
                }
            }
            // A link with no loop: where the caller's tasks run (the pool, or the simulator's executor).
            return try await exchange(link)
        } catch {
            engine?.unregister(self)
            if let tls = error as? TLSError, tls.code == .removedByPeer {
                return .refusedAsRevoked
            }
            if !state.withLock({ $0.closed }) { logger.notice("connection closed: \(error)") }
            return .ended
        }
    }

    /// Runs `body` on the global executor, off the connection's event loop: for what may read
    /// files (a store provider opening a store) or take long.
    func offLoop<T: Sendable>(_ body: @Sendable () throws -> T) async rethrows -> T {
        try await withTaskExecutorPreference(globalConcurrentExecutor) { try body() }
    }

    /// The store `name` if this device serves it, or what the store provider makes of it
    /// (opened off the event loop).
    func storeOrProvided(_ name: String) async -> SyncStore? {
        if let store = engine?.store(name) { return store }
        guard let engine else { return nil }
        let peer = peer.deviceID
        return await offLoop { engine.provide(name, for: peer) }
    }

    private func exchange<Link: PeerLink>(_ link: Link) async throws -> Outcome {
        try await link.executeThenClose { inbound, outbound in
            try await withThrowingTaskGroup(of: Void.self, returning: Outcome.self) { group in
                defer { group.cancelAll() }
                group.addTask {
                    do { try await SessionWriter(session: self, outbound: FrameBatch(outbound)).run(self.wakeUps) } catch is CancellationError {} catch { self.fail(error) }
                }
                // From the start: a peer that never says hello is dropped like a silent one.
                group.addTask {
                    do { try await self.awaitHello() } catch is CancellationError {} catch { self.fail(error) }
                }
                post { $0.hello = true }
                // The reader runs here, in the parent task, so the inbound stream never crosses tasks.
                var greeted = false
                let helloCheck = HelloCheck(account: Data(context.identity.account.id.bytes))
                for try await frame in inbound {
                    let now = context.clock.now()
                    state.withLock { $0.heard(at: now) }
                    context.metrics.received(bytes: frame.readableBytes + 4)
                    if !greeted { try HelloCheck.admitFrame(of: frame.readableBytes) }
                    let message = try SyncMessage(decoding: Data(frame.readableBytesView), sender: peer.deviceID.data)
                    context.metrics.received(message.kind, bytes: frame.readableBytes + 4)
                    if !message.isHeartbeat { state.withLock { $0.active(at: now) } }
                    if !greeted {
                        switch try helloCheck.check(message) {
                        case .removals(let records):
                            engine?.removalCoordinator.learn(records, from: self)
                            try HelloCheck.removedByPeer(namingUs: engine?.removals.isRemoved(context.identity.deviceID) == true)
                            return .removedByPeer
                        case .hello(let hello):
                            switch engine?.register(self) {
                            case .accepted?: break
                            case .removed?:
                                logger.notice("the peer was removed from the account; closing the connection")
                                return .peerRemoved
                            case .duplicate?, nil:
                                logger.debug("another connection to this peer is kept; closing this one")
                                return .duplicate
                            }
                            greeted = true
                            context.metrics.sessionStarted()
                            await greet(hello)
                            logger.info("connected", metadata: ["stores": "\(state.withLock { $0.shared.count })"])
                            engine?.changes.signal()   // the stores it shares are known now
                            continue
                        }
                    }
                    try await handle(message)
                    // What the peer confirmed or refused may have changed (waitUntilSynced).
                    engine?.changes.signal()
                }
                if greeted { engine?.unregister(self) }
                return greeted ? .ended : .duplicate
            }
        }
    }

    /// Opens every store the hello lists that this device serves (or its store provider
    /// creates); the others are the peer's alone.
    private func greet(_ hello: SyncMessage.Hello) async {
        let removals = engine?.removals
        let digest = removals.flatMap { $0.isEmpty ? nil : $0.digest }
        update { $0.greet(hello, removalsDigest: digest) }
        askForRenewalIfDue()
        for listed in hello.stores {
            if let store = engine?.store(listed.identifier) {
                engine?.served(listed.identifier, by: peer.deviceID)
                open(store, as: listed)
            } else if await storeOrProvided(listed.identifier) == nil {
                logger.debug("the peer serves store \(String(reflecting: listed.identifier)), which this device does not")
            }
        }
        // Our hello is not made yet: it will list every store attached until then (and attach()
        // announces the later ones, this session being registered now).
        guard let listed = state.withLock({ $0.listedInHello }) else { return }
        // Listed in our hello but detached since: the peer must not wait for us to sync them.
        let attached = Set(engine?.storeIdentifiers ?? [])
        update { $0.leaveDetached(isAttached: attached.contains) }
        // Attached since our hello was made, but before this session was registered: attach()
        // announced it to the sessions registered then, not to this one, so the peer would
        // never hear of it on this connection (a hub's daemon missed a store that way).
        for identifier in attached where !listed.contains(identifier) && engine?.announces(identifier, to: peer.deviceID) == true {
            if let store = engine?.store(identifier) { announce(store) }
        }
    }

    /// Drops a peer that sends no hello within the hello timeout. Once the hello is in, the
    /// engine's heartbeat ticks this session with all the others (``beat()``): one timer per
    /// device instead of one per connection, so an idle device with 7 peers wakes once per tick,
    /// not 7 times.
    private func awaitHello() async throws {
        let timeout = context.options.timeout
        let interval = context.options.heartbeatInterval
        while !state.withLock({ $0.greeted }) {
            let clock = context.clock
            try await clock.sleep(state.withLock { $0.heartbeatDelay(now: clock.now(), timeout: timeout, interval: interval) })
            if case .silent(let reason) = state.withLock({ $0.heartbeat(now: clock.now(), timeout: timeout, interval: interval) }) {
                throw SyncProtocolError(.silent, reason)
            }
        }
    }

    /// One heartbeat tick: pings when this side has sent nothing for a ping interval (so an idle
    /// link costs one small frame each way per interval, whatever the number of stores),
    /// re-stamps what a clock set right again stamped, and drops a link silent for longer than
    /// allowed. Returns how soon this session wants the next tick.
    func beat() -> Duration {
        let timeout = context.options.timeout
        let interval = context.options.heartbeatInterval
        if state.withLock({ $0.greeted }) {
            askForRenewalIfDue()
            // A clock that was ahead and has been set right: re-stamp what it stamped (pushed at once).
            for store in state.withLock({ $0.shared.values.map(\.store) }) { _ = store.replica.restampIfNeeded() }
        }
        let clock = context.clock
        switch state.withLock({ $0.heartbeat(now: clock.now(), timeout: timeout, interval: interval) }) {
        case .alive: break
        case .ping: wakeUp.yield()
        case .silent(let reason): fail(SyncProtocolError(.silent, reason))
        }
        return state.withLock { $0.heartbeatDelay(now: clock.now(), timeout: timeout, interval: interval) }
    }
}
