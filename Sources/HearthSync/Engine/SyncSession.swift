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
/// I/O shell, confined to the connection's event loop: an actor whose executor is the link's
/// loop, so the state is read and changed there alone, with no lock (as swift-nio-http2's
/// channel handler owns its connection state machine). It moves bytes (its ``SessionReader``
/// takes each frame on the loop, its ``SessionWriter`` writes what the state owes) and runs the
/// state's effects: on the replicas (each takes its own lock) and, through the engine, on the
/// other sessions.
/// What others ask of it (the engine routing an effect, a store attached, a close) is queued
/// on its loop (``enqueue(_:)``), in order. The first of the reader, the writer and the hello
/// timeout to end ends the session.
actor SyncSession {
    typealias Outcome = SessionOutcome
    typealias State = SessionState<SyncStore>

    let peer: TLSPeer
    /// The device that dialled this connection (for the duplicate rule).
    let initiator: DeviceID
    let context: SyncEngine.Context
    /// The engine this session belongs to (weak: a session never keeps a stopped engine alive).
    weak let engine: SyncEngine?
    /// The connection's event loop: where the state lives and every job of the session runs
    /// (TLS: the channel's loop; in memory: one the network was given). Nil (a link with no
    /// loop, as the household simulator's): the session is a default actor, see ``anchor``.
    let eventLoop: (any EventLoop)?
    /// The loop as a serial executor (kept: the actor holds it unowned).
    private let executor: (any SerialExecutor)?
    /// With no loop, the session runs on this default actor's executor: an actor type has one
    /// `unownedExecutor`, and a default actor's is reachable only through an actor that has it.
    /// Its jobs go to the global executor, which the simulator replaces to see every job.
    private let anchor: Anchor?
    private actor Anchor {}
    nonisolated var unownedExecutor: UnownedSerialExecutor {
        if let executor { return executor.asUnownedSerialExecutor() }
        return anchor!.unownedExecutor
    }
    /// With no loop, what others ask of the session (``enqueue(_:)``), in order: drained on the
    /// session's executor while it runs (``drainAsked()``).
    private let asked: AsyncStream<@Sendable (isolated SyncSession) -> Void>
    private let ask: AsyncStream<@Sendable (isolated SyncSession) -> Void>.Continuation
    /// The protocol's state: everything this connection knows and owes. Confined to the loop.
    /// Read in place (`_read`: a `didSet` property's getter copied the whole state, dozens of
    /// retains, for every `session.state.x` read, several per frame) and changed in place, each
    /// change then published (``publishSharing(of:)``).
    var state: State {
        // Borrowed and changed in place: with a `didSet` instead, each read of a field
        // (`session.state.shared[name]`) copied the whole state, every field retained and
        // released (a tenth of the household simulator's time).
        _read { yield storedState }
        _modify {
            defer { publishSharing(of: &storedState) }
            yield &storedState
        }
        set {
            storedState = newValue
            publishSharing(of: &storedState)
        }
    }
    private var storedState: State
    /// What other threads read of the state: the stores both ends serve, each with what the
    /// peer confirmed having (``shares(_:)``, ``acknowledgedVector(of:)``, for
    /// ``SyncStore/isSettled`` and the engine's routing). A copy written on the loop whenever
    /// it changes, never read back here: the state itself has no lock.
    private let sharing = Locked<[String: VersionVector]>([:])
    /// The last copy written to ``sharing``.
    private var published: [String: VersionVector] = [:]
    /// Wakes the writer; holds at most one wake-up (the state's mailbox holds what to send).
    private let wakeUp: AsyncStream<Void>.Continuation
    let wakeUps: AsyncStream<Void>
    /// Arms the ack timer of a session with no loop (``runAckTimer()``); the mailbox arms it once at a time.
    private let ackTimerArm: AsyncStream<Void>.Continuation
    private let ackTimerArms: AsyncStream<Void>
    /// Closes the link from any thread: the way to stop the reader, which waits on it.
    private let closeLink: @Sendable () -> Void
    let logger: Logger

    init(link: some PeerLink, initiatedLocally: Bool, context: SyncEngine.Context, engine: SyncEngine) {
        peer = link.peer
        eventLoop = link.eventLoop
        executor = link.eventLoop?.executor
        anchor = link.eventLoop == nil ? Anchor() : nil
        (asked, ask) = AsyncStream.makeStream()
        closeLink = { [link] in link.closeSoon() }
        initiator = initiatedLocally ? context.identity.deviceID : link.peer.deviceID
        var state = State(now: context.clock.now(), dialled: initiatedLocally)
        state.mailbox.holdsAcks = true
        storedState = state
        self.context = context
        self.engine = engine
        (wakeUps, wakeUp) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        (ackTimerArms, ackTimerArm) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        var logger = context.logger
        logger[metadataKey: "peer"] = "\(link.peer)"
        self.logger = logger
    }

    // MARK: Asked from other threads

    /// Runs `body` on the session's loop, isolated to it, after everything asked before: how the
    /// engine and the other sessions reach this one's state (no lock, no task per call).
    nonisolated func enqueue(_ body: @escaping @Sendable (isolated SyncSession) -> Void) {
        guard let eventLoop else { ask.yield(body); return }
        eventLoop.execute { self.assumeIsolated { body($0) } }
    }

    /// Runs what was asked of a session with no loop, in order, until the session ends.
    private func drainAsked() async {
        for await body in asked { body(self) }
    }

    /// Both ends serve `store` on this connection: ours is open here, and the peer listed it in
    /// its hello or sent its state since (a store we announced and it ignores is not shared).
    /// From the copy the loop publishes: as of its last change.
    nonisolated func shares(_ store: String) -> Bool { sharing.withLock { $0[store] != nil } }

    /// What the peer has confirmed having of `store`; `nil` if this connection does not sync it.
    nonisolated func acknowledgedVector(of store: String) -> VersionVector? {
        sharing.withLock { $0[store] }
    }

    /// Keeps ``sharing`` equal to what the state says (after each change of it; compared
    /// first, so that the copy is written only when it changes, at most a few times a message).
    /// `state` in place (`inout`): a read of the stored state copied all of it first.
    private func publishSharing(of state: inout State) {
        var count = 0
        var same = true
        // By index, reading only each store's vector: a `for (name, shared) in` copied every
        // store's whole state out of the dictionary at each change of the session's state.
        let stores = state.shared
        for index in stores.indices where state.served.contains(stores.keys[index]) {
            count += 1
            if published[stores.keys[index]] != stores.values[index].acknowledged { same = false; break }
        }
        guard !same || count != published.count else { return }
        var copy: [String: VersionVector] = [:]
        for (name, shared) in state.shared where state.served.contains(name) { copy[name] = shared.acknowledged }
        published = copy
        sharing.withLock { $0 = copy }
    }

    /// Asks the writer to send every removal we know (we learned one since the hellos).
    nonisolated func relayRemovals() {
        enqueue { $0.update { $0.relayRemovals() } }
    }

    /// Asks the peer for its whole `store`, if shared here (``SessionState/askForWhole(_:)``).
    nonisolated func askForWhole(_ store: SyncStore) {
        let name = store.identifier
        enqueue { _ = $0.update { $0.askForWhole(name) } }
    }

    /// Sends the peer the removals that name it, then closes; closes at once if it cannot be
    /// told (an older build), and in any case within a second (a peer that does not read).
    nonisolated func expel() {
        enqueue { session in
            guard session.update({ $0.expel() }) else { session.closeNow(); return }
            let clock = session.context.clock
            Task { [weak session] in
                try? await clock.sleep(.seconds(1))
                session?.close()
            }
        }
    }

    /// If the peer is linked to one of `writers` (device prefixes), sends it our vector of
    /// `store` after `delay` (one `store` message however many changes meanwhile).
    nonisolated func tellVectorSoon(of store: String, ifLinkedTo writers: Set<UInt64>, after delay: Duration) {
        enqueue { session in
            guard session.state.tellVectorSoon(of: store, ifLinkedTo: writers) else { return }
            let clock = session.context.clock
            Task { [weak session] in
                try? await clock.sleep(delay)
                session?.enqueue { $0.update { $0.vectorTellDue(of: store) } }
            }
        }
    }

    /// Asks the writer to send whatever the peer lacks of `store` now.
    nonisolated func push(_ store: String) {
        enqueue { session in
            guard session.state.shares(store) else { return }
            session.post(store) { $0.delta = true }
        }
    }

    /// Stops syncing `store` (detached on this device) and tells the peer.
    nonisolated func leave(_ store: String) {
        enqueue { $0.update { $0.leave(store) } }
    }

    /// `device` no longer serves `store`: stop leaving its writes to it.
    nonisolated func forgetDeferred(_ device: DeviceID, of store: String) {
        enqueue { $0.update { $0.forgetDeferred(device, of: store) } }
    }

    /// The engine's set of sessions changed: the peer is told our links.
    nonisolated func relayLinks() {
        enqueue { $0.update { $0.relayLinks() } }
    }

    /// Starts syncing `store`, attached on this device since the hellos (``announceNow(_:)``).
    nonisolated func announce(_ store: SyncStore) {
        enqueue { $0.announceNow(store) }
    }

    /// Notes what the peer said it has of origins we have only now come to know (an entry
    /// arrived from elsewhere): it got them from their writer and told us before we had them.
    nonisolated func noteClaimsNowKnown(of store: SyncStore) {
        enqueue { session in
            let ours = store.replica.syncVector
            guard let known = session.state.claimsNowKnown(of: store.identifier, in: ours) else { return }
            store.replica.notePeer(session.peer.deviceID, acknowledged: known)
        }
    }

    /// Answers the peer's request for a renewed certificate, if it made one (the account CA was
    /// just unlocked here).
    nonisolated func answerRenewalIfAsked() {
        enqueue { session in
            guard session.state.renewal.askedByPeer, let renewal = session.engine?.renewal else { return }
            renewal.issue(to: session)
        }
    }

    /// Ends the session (its connection closes), from any thread.
    nonisolated func close() {
        enqueue { $0.closeNow() }
    }

    // MARK: On the loop

    /// Asks the peer for a renewed certificate, once per connection, if ours is within its
    /// renewal window and the peer understands renewals.
    func askForRenewalIfDue() {
        guard let engine, engine.renewal.isDue else { return }
        update { $0.askForRenewal() }
    }

    /// Changes the state and wakes the writer (the change may have posted something to send).
    @discardableResult
    func update<T>(_ change: (inout State) -> T) -> T {
        let result = change(&state)
        wakeUp.yield()
        return result
    }

    /// Wakes the writer (something was posted to the state's mailbox).
    nonisolated func wake() { wakeUp.yield() }

    /// How long an ack waits for other mail to travel with (``SessionMailbox/holdsAcks``): a
    /// peer waiting to be settled (`waitUntilSynced`) learns this much later at most.
    static let ackDelay = Duration.milliseconds(10)

    /// Releases the held acks after ``ackDelay`` (the mailbox noted the timer as armed): on the
    /// loop, a task NIO schedules there (one pending when the loop shuts down is dropped
    /// quietly); with no loop, the session's timer task, on the engine's clock (the simulator's
    /// virtual one).
    nonisolated func armAckTimer() {
        guard let eventLoop else { ackTimerArm.yield(); return }
        let (seconds, attoseconds) = Self.ackDelay.components
        eventLoop.scheduleTask(in: .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)) {
            self.assumeIsolated { $0.update { $0.mailbox.ackTimerFired() } }
        }
    }

    /// The ack timer of a session with no loop: a task of the session's group (``exchange(_:)``),
    /// so it ends with the session. Each arming waits ``ackDelay``, then lets the held acks go.
    private func runAckTimer() async {
        for await _ in ackTimerArms {
            do { try await context.clock.sleep(Self.ackDelay) } catch { return }
            update { $0.mailbox.ackTimerFired() }
        }
    }

    /// Records what to send and wakes the writer.
    func post(_ change: (inout SessionMailbox) -> Void) {
        update { change(&$0.mailbox) }
    }

    /// Records what to send of `store` and wakes the writer.
    func post(_ store: String, _ change: (inout SessionMailbox.StoreMail) -> Void) {
        update { $0.mailbox.post(store, change) }
    }

    /// Ends the session: its connection closes, which ends the reader.
    func closeNow() {
        state.closed = true
        wakeUp.finish()
        ackTimerArm.finish()
        closeLink()
    }

    func fail(_ error: any Error) {
        if !state.closed { logger.notice("closing the connection: \(error)") }
        closeLink()
    }

    // MARK: Stores coming and going (opened and the peer's state of one: ``SessionReader``)

    /// Starts syncing `store`, attached on this device since the hellos: the peer is told our
    /// vector and, if it serves the store (or its store provider takes it up, as a device
    /// daemon's does), answers with its own; deltas wait for that answer. A peer that serves
    /// it not ignores the message, as it would have ignored the store in our hello.
    func announceNow(_ store: SyncStore) {
        // First: the peer's answer may come as soon as our state is posted.
        store.keep(peerCertificate: peer.certificate, of: peer.deviceID)
        let whole = store.wantsWhole
        guard let replay = update({ $0.announce(store, named: store.identifier, wantsWhole: whole) }) else { return }
        // The peer told its state before this device had the store: it counts as its answer.
        if let replay { SessionReader.receive(replay, on: self) }
    }

    // MARK: Running

    /// The writer (``SessionWriter``): sends what the state's mailbox holds each time it is
    /// woken, until the link ends.
    func runWriter(_ link: any PeerLinkWriter) async throws {
        try await SessionWriter(link).run(on: self)
    }

    /// Runs the session on `link` (the one it was made with) until it ends.
    nonisolated func run<Link: PeerLink>(_ link: Link) async -> Outcome {
        await noteLinkUp()
        do {
            // What is not the session's own (decoding the stream, the link's writes, checking
            // signatures) runs on the loop too: a frame resumes the reader, and the writer's bytes
            // reach the channel, without a hand-off between threads (EventLoopTaskExecutor).
            if let eventLoop {
                return try await withTaskExecutorPreference(EventLoopTaskExecutor(eventLoop)) {
                    try await exchange(link)
                }
            }
            // A link with no loop: where the caller's tasks run (the pool, or the simulator's executor).
            return try await exchange(link)
        } catch {
            let revoked = (error as? TLSError)?.code == .removedByPeer
            await linkFailed(error, logged: !revoked)
            engine?.unregister(self)
            return revoked ? .refusedAsRevoked : .ended
        }
    }

    /// The link failed: the writer stops, and why is logged unless we closed it.
    private func linkFailed(_ error: any Error, logged: Bool) {
        state.linkEnded = true
        if logged, !state.closed { logger.notice("connection closed: \(error)") }
    }

    /// Runs `body` on the global executor, off the connection's event loop: for what may read
    /// files (a store provider opening a store) or take long.
    nonisolated func offLoop<T: Sendable>(_ body: @Sendable () throws -> T) async rethrows -> T {
        try await withTaskExecutorPreference(globalConcurrentExecutor) { try body() }
    }

    /// The store `name` if this device serves it, or what the store provider makes of it
    /// (opened off the event loop).
    nonisolated func storeOrProvided(_ name: String) async -> SyncStore? {
        if let store = engine?.store(name) { return store }
        guard let engine else { return nil }
        let peer = peer.deviceID
        return await offLoop { engine.provide(name, for: peer) }
    }

    /// The reader: hands each frame to the loop (``SessionReader``), in order, until the link ends
    /// or a frame ends the session. Not isolated: the inbound stream stays in this task.
    private nonisolated func exchange<Link: PeerLink>(_ link: Link) async throws -> Outcome {
        try await link.executeThenClose { inbound, outbound in
            try await withThrowingTaskGroup(of: Void.self, returning: Outcome.self) { group in
                defer { group.cancelAll() }
                group.addTask {
                    do { try await self.runWriter(outbound) } catch is CancellationError {} catch { await self.fail(error) }
                }
                if self.eventLoop == nil {
                    group.addTask { await self.drainAsked() }
                    group.addTask { await self.runAckTimer() }
                }
                // From the start: a peer that never says hello is dropped like a silent one.
                group.addTask {
                    do { try await self.awaitHello() } catch is CancellationError {} catch { await self.fail(error) }
                }
                await self.post { $0.hello = true }
                var reader = SessionReader(account: Data(self.context.identity.account.id.bytes))
                for try await frame in inbound {
                    if let outcome = try await reader.take(frame, on: self) { return outcome }
                }
                return await reader.ended(on: self)
            }
        }
    }

    /// The peer's link is up: a device of the account, its hello on its way, which until it says
    /// what it has may hold an entry older than any tombstone here. It is made a known device
    /// (nothing acknowledged) of every store this engine would sync with it, so that no tombstone
    /// is collected on the word of the peers heard so far: another session's ack, on another
    /// thread, may come before this peer's hello is read, and the peer's older entry would then
    /// come back with nothing to lose to (docs/architecture.md, "Who runs where").
    private func noteLinkUp() {
        guard let engine else { return }
        var noted = Set<String>()
        for identifier in engine.storeIdentifiers where engine.announces(identifier, to: peer.deviceID) {
            guard let store = engine.store(identifier), !store.replica.knownDevices.contains(peer.deviceID) else { continue }
            store.replica.learnOfDevices([peer.deviceID])
            noted.insert(identifier)
        }
        state.linkUp(knownIn: noted)
    }

    /// Drops a peer that sends no hello within the hello timeout. Once the hello is in, the
    /// engine's heartbeat ticks this session with all the others (``beat()``): one timer per
    /// device instead of one per connection, so an idle device with 7 peers wakes once per tick,
    /// not 7 times.
    private func awaitHello() async throws {
        let timeout = context.options.timeout
        let interval = context.options.heartbeatInterval
        let clock = context.clock
        while !state.greeted {
            try await clock.sleep(state.heartbeatDelay(now: clock.now(), timeout: timeout, interval: interval))
            if case .silent(let reason) = state.heartbeat(now: clock.now(), timeout: timeout, interval: interval) {
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
        if state.greeted {
            askForRenewalIfDue()
            // A clock that was ahead and has been set right: re-stamp what it stamped (pushed at once).
            for (name, shared) in state.shared {
                let replica = shared.store.replica
                _ = replica.restampIfNeeded()
                // A removal stamped ahead, waiting for this clock: no acknowledgement may come after it reaches it.
                replica.collectReachedTombstones()
                // A re-stamp made or taken here, or held entries the clock now accepts: what the
                // future entry had beaten, or the held entries, come again from the peers' whole
                // stores (docs/protocol.md, "A clock set right again"); asked of every peer at once,
                // each session's `askWhole` and `awaitingWhole` guarding the repeats.
                if replica.wantsWhole, state.askForWhole(name) {
                    wakeUp.yield()
                    shared.store.askEveryPeerForWhole()
                }
            }
        }
        let clock = context.clock
        switch state.heartbeat(now: clock.now(), timeout: timeout, interval: interval) {
        case .alive: break
        case .ping: wakeUp.yield()
        case .silent(let reason): fail(SyncProtocolError(.silent, reason))
        }
        return state.heartbeatDelay(now: clock.now(), timeout: timeout, interval: interval)
    }
}
