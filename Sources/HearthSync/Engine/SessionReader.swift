import Foundation
import HearthCore
import HearthIdentity
import NIOCore

/// A session's reader: what it does with each frame its link delivers, in order. Until the
/// peer's hello is admitted, a frame is checked as a hello (``HelloCheck``): removal records end
/// the session, a hello registers it with the engine and opens the stores both serve. After
/// that, each message goes to the state's decisions, and their effects run: on the replicas
/// (deltas checked and applied through ``SyncStore``), and through the engine on the other
/// sessions.
///
/// Its session makes one when its link is up (``SyncSession/run(_:)``) and hands it each frame
/// from the reader's task. It owns the hello's admission, and the stores' opening and the
/// peer's state of each (``open(_:as:on:)``, ``receive(_:on:)``); the protocol's state is the
/// session's, which it reads and changes on the session's loop, isolated to the session it is
/// given, with no hop or lock.
struct SessionReader: Sendable {
    typealias State = SyncSession.State
    typealias Outcome = SessionOutcome

    /// Whether the peer's hello was admitted (``take(_:on:)``): the frames before it are checked
    /// as a hello, and the engine is told when the session ends.
    private var admitted = false
    private let helloCheck: HelloCheck

    init(account: Data) {
        helloCheck = HelloCheck(account: account)
    }

    /// One frame from the peer: checked as a hello until one is admitted, then handled. Returns
    /// how the session ends, if this frame ends it.
    mutating func take(_ frame: ByteBuffer, on session: isolated SyncSession) async throws -> Outcome? {
        let context = session.context
        let now = context.clock.now()
        session.state.heard(at: now)
        context.metrics.received(bytes: frame.readableBytes + 4)
        if !admitted { try HelloCheck.admitFrame(of: frame.readableBytes) }
        let message = try SyncMessage(decoding: frame.readableData, sender: session.peer.deviceID.data)
        context.metrics.received(message.kind, bytes: frame.readableBytes + 4)
        if !message.isHeartbeat { session.state.active(at: now) }
        if !admitted {
            switch try helloCheck.check(message) {
            case .removals(let records):
                session.engine?.removalCoordinator.learn(records, from: session)
                try HelloCheck.removedByPeer(namingUs: session.engine?.removals.isRemoved(context.identity.deviceID) == true)
                return .removedByPeer
            case .hello(let hello):
                forgetUnlisted(hello, on: session)
                switch session.engine?.register(session) {
                case .accepted?: break
                case .removed?:
                    session.logger.notice("the peer was removed from the account; closing the connection")
                    return .peerRemoved
                case .duplicate?, nil:
                    session.logger.debug("another connection to this peer is kept; closing this one")
                    return .duplicate
                }
                admitted = true
                context.metrics.sessionStarted()
                await greet(hello, on: session)
                session.logger.info("connected", metadata: ["stores": "\(session.state.shared.count)"])
                session.engine?.changes.signal()   // the stores it shares are known now
                return nil
            }
        }
        try await handle(message, on: session)
        // What the peer confirmed or refused may have changed (waitUntilSynced).
        session.engine?.changes.signal()
        return nil
    }

    /// The link ended (the peer closed it, or we did).
    func ended(on session: isolated SyncSession) -> Outcome {
        session.state.linkEnded = true
        if admitted { session.engine?.unregister(session) }
        return admitted ? .ended : .duplicate
    }

    /// The peer's hello: where it was made known at link-up but serves not the store, it is
    /// forgotten again, so that it does not hold back that store's tombstones.
    private func forgetUnlisted(_ hello: SyncMessage.Hello, on session: isolated SyncSession) {
        let unlisted = session.state.notServedSinceLinkUp(listed: Set(hello.stores.map(\.identifier)))
        for identifier in unlisted { session.engine?.store(identifier)?.replica.forgetDevice(session.peer.deviceID) }
    }

    /// Opens every store the hello lists that this device serves (or its store provider
    /// creates); the others are the peer's alone.
    private func greet(_ hello: SyncMessage.Hello, on session: isolated SyncSession) async {
        let peer = session.peer
        let removals = session.engine?.removals
        let digest = removals.flatMap { $0.isEmpty ? nil : $0.digest }
        session.update { $0.greet(hello, removalsDigest: digest) }
        session.askForRenewalIfDue()
        for listed in hello.stores {
            if let store = session.engine?.store(listed.identifier) {
                session.engine?.served(listed.identifier, by: peer.deviceID)
                Self.open(store, as: listed, on: session)
            } else if await session.storeOrProvided(listed.identifier) == nil {
                session.logger.debug("the peer serves store \(String(reflecting: listed.identifier)), which this device does not")
            }
        }
        // Our hello is not made yet: it will list every store attached until then (and attach()
        // announces the later ones, this session being registered now).
        guard let listed = session.state.listedInHello else { return }
        // Listed in our hello but detached since: the peer must not wait for us to sync them.
        let attached = Set(session.engine?.storeIdentifiers ?? [])
        session.update { $0.leaveDetached(isAttached: attached.contains) }
        // Attached since our hello was made, but before this session was registered: attach()
        // announced it to the sessions registered then, not to this one, so the peer would
        // never hear of it on this connection (a hub's daemon missed a store that way).
        for identifier in attached where !listed.contains(identifier) && session.engine?.announces(identifier, to: peer.deviceID) == true {
            if let store = session.engine?.store(identifier) { session.announceNow(store) }
        }
    }

    // Stores coming and going: opened as the peer's hello lists them, and the peer's state of
    // one (static: ``SyncSession/announceNow(_:)`` replays a state the peer told before).

    /// Starts syncing `store` on this connection, as the peer's hello listed it.
    static func open(_ store: SyncStore, as listed: SyncMessage.Hello.Store, on session: isolated SyncSession) {
        let (ours, vector) = store.announcement()
        let view = State.ReplicaView(vector: vector, awaitingInitialSync: store.replica.awaitingInitialSync, wantsWhole: store.wantsWhole)
        let effects = session.update { $0.open(store, named: store.identifier, listed: listed, ours: ours, view: view) }
        store.perform(effects, for: session.peer)
    }

    /// The peer's state of one store: it serves it (with this vector, knowing these devices),
    /// or no longer does.
    static func receive(_ message: SyncMessage.StoreState, on session: isolated SyncSession) {
        let name = message.store
        if message.left {
            session.state.peerLeft(name)
            // Our other peers may have been left to this device for its last writes.
            session.engine?.left(name, by: session.peer.deviceID)
            return
        }
        guard session.state.peerServes(name) else {
            session.logger.debug("ignoring store \(String(reflecting: name)): the peer already serves \(SyncMessage.maximumStores) stores")
            return
        }
        // Provided (if the store provider would) before this is called from a message: a store
        // provided then was attached, which announced it on this connection (and so opened it here).
        guard let store = session.engine?.store(name) else {
            session.logger.debug("ignoring the state of store \(String(reflecting: name)), which this device does not serve")
            session.state.ignore(message)
            return
        }
        let view = State.ReplicaView(vector: store.replica.syncVector, awaitingInitialSync: store.replica.awaitingInitialSync,
                                     wantsWhole: store.wantsWhole)
        let ours = session.context.identity.deviceID
        let effects = session.state.receive(message, for: store, view: view, ourDevice: ours)
        // Before the writer wakes: the peer's entries are checked against its certificate.
        store.perform(effects, for: session.peer)
        session.wake()
    }

    // What a session does with the messages that arrive after the hello.

    private func handle(_ message: SyncMessage, on session: isolated SyncSession) async throws {
        let peer = session.peer
        switch message {
        case .hello: throw SyncProtocolError("a second hello")
        case .ping(let vectors), .pong(let vectors):
            try await pace(\.heartbeats, "pings and pongs", wait: { $0.heartbeatArrived(at: $1) }, on: session)
            for (name, claimed) in vectors {
                if let store = session.state.shared[name]?.store { acknowledge(claimed, of: name, in: store, known: false, saved: true, on: session) }
            }
            if case .ping = message { session.post { $0.pong = true } }
            return
        case .store(let message):
            // A store this device does not serve yet may be the store provider's to open: off the loop.
            if !message.left, session.state.peerServes(message.store) {
                _ = await session.storeOrProvided(message.store)
                session.engine?.served(message.store, by: peer.deviceID)
            }
            Self.receive(message, on: session)
            return
        case .removals(let records):
            try await pace(\.removalMessages, "removals", wait: { $0.removalsArrived(at: $1) }, on: session)
            session.engine?.removalCoordinator.learn(records, from: session)
            return
        case .renew:
            session.engine?.renewal.asked(by: session)
            return
        case .certificate(let der):
            session.engine?.renewal.renewed(der, from: session)
            return
        case .links(let links):
            receive(links, on: session)
            return
        case .delta, .ack, .refused: break
        }
        // A message about a store this connection does not sync (the peer serves a store this
        // device does not, or one just detached) is ignored: the others go on.
        guard let name = message.storeIdentifier, let store = session.state.shared[name]?.store else {
            session.logger.debug("ignoring a message about store \(String(reflecting: message.storeIdentifier ?? "")), not synced on this connection")
            return
        }
        switch message {
        case .delta(let delta):
            let (initial, whole) = (session.state.deltaArrived(for: name, more: delta.more), session.state.wholeArrived(of: name, more: delta.more))
            try await apply(delta, to: store, initial: initial, on: session)
            if whole { store.wholeReceived(from: peer.deviceID) }
        case .ack(let ack):
            let ours = store.replica.syncVector
            let effects = session.state.acknowledged(ack, ours: ours)
            if !effects.isEmpty { store.perform(effects, for: peer) }
        case .refused(let refusal):
            let fresh = store.note(refusal, from: peer.deviceID)
            guard !fresh.isEmpty else { return }
            store.logger.warning("the peer refused \(fresh.count) entr\(fresh.count == 1 ? "y" : "ies") this device sent; the rest was applied: \(Self.summary(fresh))",
                                        metadata: ["peer": "\(peer)"])
        case .hello, .ping, .pong, .store, .removals, .renew, .certificate, .links: break
        }
    }

    /// Waits, if the peer sends frames of this kind faster than `pacer` allows, until it is
    /// their turn (the reader waits, and the peer's frames wait in its socket meanwhile);
    /// logged once per peer a minute. After a minute of waits in a row, closes the link.
    private func pace(_ pacer: KeyPath<State, Pacer>, _ kind: String, wait: (inout State, ContinuousClock.Instant) -> Duration,
                      on session: isolated SyncSession) async throws {
        let context = session.context
        let now = context.clock.now()
        let delay = wait(&session.state, now)
        let limit = session.state[keyPath: pacer]
        guard delay > .zero else { return }
        if limit.exhausted {
            throw SyncProtocolError("the peer sent \(kind) faster than one per \(limit.spacing) for \(limit.waitedInARow) in a row; closing")
        }
        context.limitedLog.log(.warning, "the peer sends \(kind) faster than \(limit.burst) at once and then one per \(limit.spacing); reading them at that pace",
                               kind: "paced \(kind)", peer: "\(session.peer.deviceID)", to: session.logger)
        try await context.clock.sleep(delay)
        // Closed meanwhile (replaced, expelled): the frames still buffered are not worth the wait.
        if session.state.closed { throw CancellationError() }
    }

    /// Records that the peer has what `claimed` says of store `name` (counters of origins we do
    /// not know are dropped), for settling and, if it has `saved` it, tombstone collection;
    /// `known`: it has what we sent too (an ack), not only what it says (a ping).
    private func acknowledge(_ claimed: VersionVector, of name: String, in store: SyncStore, known: Bool,
                             saved: Bool, ours: VersionVector? = nil, on session: isolated SyncSession) {
        let ours = ours ?? store.replica.syncVector
        if let effect = session.state.acknowledge(claimed, of: name, ours: ours, known: known, saved: saved) {
            store.perform([effect], for: session.peer)
        }
    }

    /// The peer's links: the devices it has a session with now, and its vectors of the stores
    /// that changed since it last told us (taken first, so that what we then owe it for a
    /// link that is gone starts from what it has).
    private func receive(_ links: SyncMessage.Links, on session: isolated SyncSession) {
        for (name, claimed) in links.stores {
            if let store = session.state.shared[name]?.store { acknowledge(claimed, of: name, in: store, known: true, saved: true, on: session) }
        }
        // Malformed IDs are dropped; our own ID means nothing here.
        let devices = Set(links.devices.compactMap { DeviceID(bytes: $0) }).subtracting([session.context.identity.deviceID])
        session.update { $0.peerLinked(devices) }
        // After the update: a test that waits for this line then counts on it.
        session.logger.debug("the peer's links", metadata: ["links": "\(devices.map(\.short).sorted().joined(separator: ","))"])
    }

    /// Checks every entry, applies those that pass as one batch, and tells the peer about
    /// the others: one bad entry is refused alone, and the link stays up.
    private func apply(_ delta: SyncMessage.Delta, to store: SyncStore, initial: Bool, on session: isolated SyncSession) async throws {
        let context = session.context, peer = session.peer
        let checked = await store.check(delta)
        // An honest device never sends an entry whose signature fails; one that keeps doing so
        // is made to pay a new connection (a TLS handshake) for every few of them.
        let forged = checked.refused.filter { [.badSignature, .unknownSigner, .originMismatch].contains($0.reason) }.count
        if session.state.noteForged(forged) {
            throw SyncProtocolError("the peer sent more than \(State.maximumForgedEntries) entries whose signature does not verify; closing")
        }
        let replica = store.replica
        let reason: ChangeReason = initial && replica.awaitingInitialSync ? .initialSyncChange : .serverChange
        let (changed, overQuota) = replica.applyRemote(checked.accepted, heldBack: checked.heldBack, reason: reason)
        if reason == .initialSyncChange, !delta.more { replica.initialSyncCompleted() }
        context.metrics.receivedEntries(delta.entries.count)
        // What we have now, for the ack: taken before noting the sender's claim below, which may
        // collect tombstones the sender just sent (and drop their origins from our vector).
        let applied = replica.syncVector
        // The sender has what it sent and what its vector claims (as an ack or ping would say):
        // known and acknowledged, for settling and tombstone collection.
        acknowledge(delta.vector, of: store.identifier, in: store, known: true, saved: false, ours: applied, on: session)
        let refused = checked.refused + overQuota
        if !refused.isEmpty {
            let count = delta.entries.count + delta.undecodable.count
            // The peer is told each time; the log, once a minute (a peer may send them without end).
            context.limitedLog.log(.warning, "refused \(refused.count) of \(count) entries from the peer, applied the rest, and told the peer: \(Self.summary(refused))",
                                   kind: "refused entries of \(store.identifier)", peer: "\(peer.deviceID)", to: store.logger, metadata: ["peer": "\(peer)"])
        }
        // The writer is woken only for what goes out now: an ack alone waits (SessionMailbox.holdsAcks).
        let effects = session.state.deltaApplied(store.identifier, carried: delta.entries.count + delta.undecodable.count,
                                                 accepted: checked.accepted, changed: !changed.isEmpty, refused: refused,
                                                 clock: replica.wallMilliseconds(), applied: applied, senderHas: delta.vector)
        if session.state.mailbox.hasSendable { session.wake() }
        if session.state.mailbox.heldAcksNeedTimer() { session.armAckTimer() }
        if !changed.isEmpty { store.logger.debug("applied \(checked.accepted.count) entries; changed \(changed.count) keys") }
        session.engine?.route(effects, from: peer.deviceID, in: store)
    }

    /// The first few items, for a log line.
    static func summary(_ items: [some CustomStringConvertible]) -> String {
        items.prefix(8).map(\.description).joined(separator: "; ") + (items.count > 8 ? "; …" : "")
    }
}
