import Foundation
import HearthCore
import HearthIdentity

// What a session does with the messages that arrive after the hello (on its loop).
extension SyncSession {
    func handle(_ message: SyncMessage) async throws {
        switch message {
        case .hello: throw SyncProtocolError("a second hello")
        case .ping(let vectors), .pong(let vectors):
            try await pace(\.heartbeats, "pings and pongs", wait: { $0.heartbeatArrived(at: $1) })
            for (name, claimed) in vectors {
                if let store = state.shared[name]?.store { acknowledge(claimed, of: name, in: store, known: false, saved: true) }
            }
            if case .ping = message { post { $0.pong = true } }
            return
        case .store(let message):
            // A store this device does not serve yet may be the store provider's to open: off the loop.
            if !message.left, state.peerServes(message.store) {
                _ = await storeOrProvided(message.store)
                engine?.served(message.store, by: peer.deviceID)
            }
            receive(message)
            return
        case .removals(let records):
            try await pace(\.removalMessages, "removals", wait: { $0.removalsArrived(at: $1) })
            engine?.removalCoordinator.learn(records, from: self)
            return
        case .renew:
            engine?.renewal.asked(by: self)
            return
        case .certificate(let der):
            engine?.renewal.renewed(der, from: self)
            return
        case .links(let links):
            receive(links)
            return
        case .delta, .ack, .refused: break
        }
        // A message about a store this connection does not sync (the peer serves a store this
        // device does not, or one just detached) is ignored: the others go on.
        guard let name = message.storeIdentifier, let store = state.shared[name]?.store else {
            logger.debug("ignoring a message about store \(String(reflecting: message.storeIdentifier ?? "")), not synced on this connection")
            return
        }
        switch message {
        case .delta(let delta):
            let (initial, whole) = (state.deltaArrived(for: name, more: delta.more), state.wholeArrived(of: name, more: delta.more))
            try await apply(delta, to: store, initial: initial)
            if whole { store.wholeReceived() }
        case .ack(let ack):
            let ours = store.replica.syncVector
            let effects = state.acknowledged(ack, ours: ours)
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
    private func pace(_ pacer: KeyPath<State, Pacer>, _ kind: String, wait: (inout State, ContinuousClock.Instant) -> Duration) async throws {
        let now = context.clock.now()
        let delay = wait(&state, now)
        let limit = state[keyPath: pacer]
        guard delay > .zero else { return }
        if limit.exhausted {
            throw SyncProtocolError("the peer sent \(kind) faster than one per \(limit.spacing) for \(limit.waitedInARow) in a row; closing")
        }
        context.limitedLog.log(.warning, "the peer sends \(kind) faster than \(limit.burst) at once and then one per \(limit.spacing); reading them at that pace",
                               kind: "paced \(kind)", peer: "\(peer.deviceID)", to: logger)
        try await context.clock.sleep(delay)
        // Closed meanwhile (replaced, expelled): the frames still buffered are not worth the wait.
        if state.closed { throw CancellationError() }
    }

    /// Records that the peer has what `claimed` says of store `name` (counters of origins we do
    /// not know are dropped), for settling and, if it has `saved` it, tombstone collection;
    /// `known`: it has what we sent too (an ack), not only what it says (a ping).
    private func acknowledge(_ claimed: VersionVector, of name: String, in store: SyncStore, known: Bool,
                             saved: Bool, ours: VersionVector? = nil) {
        let ours = ours ?? store.replica.syncVector
        if let effect = state.acknowledge(claimed, of: name, ours: ours, known: known, saved: saved) {
            store.perform([effect], for: peer)
        }
    }

    /// The peer's links: the devices it has a session with now, and its vectors of the stores
    /// that changed since it last told us (taken first, so that what we then owe it for a
    /// link that is gone starts from what it has).
    private func receive(_ links: SyncMessage.Links) {
        for (name, claimed) in links.stores {
            if let store = state.shared[name]?.store { acknowledge(claimed, of: name, in: store, known: true, saved: true) }
        }
        // Malformed IDs are dropped; our own ID means nothing here.
        let devices = Set(links.devices.compactMap { DeviceID(bytes: $0) }).subtracting([context.identity.deviceID])
        update { $0.peerLinked(devices) }
        // After the update: a test that waits for this line then counts on it.
        logger.debug("the peer's links", metadata: ["links": "\(devices.map(\.short).sorted().joined(separator: ","))"])
    }

    /// The peer's state of one store: it serves it (with this vector, knowing these devices),
    /// or no longer does.
    func receive(_ message: SyncMessage.StoreState) {
        let name = message.store
        if message.left {
            state.peerLeft(name)
            // Our other peers may have been left to this device for its last writes.
            engine?.left(name, by: peer.deviceID)
            return
        }
        guard state.peerServes(name) else {
            logger.debug("ignoring store \(String(reflecting: name)): the peer already serves \(SyncMessage.maximumStores) stores")
            return
        }
        // Provided (if the store provider would) before this is called from a message: a store
        // provided then was attached, which announced it on this connection (and so opened it here).
        guard let store = engine?.store(name) else {
            logger.debug("ignoring the state of store \(String(reflecting: name)), which this device does not serve")
            state.ignore(message)
            return
        }
        let view = State.ReplicaView(vector: store.replica.syncVector, awaitingInitialSync: store.replica.awaitingInitialSync,
                                     wantsWhole: store.wantsWhole)
        let ours = context.identity.deviceID
        let effects = state.receive(message, for: store, view: view, ourDevice: ours)
        // Before the writer wakes: the peer's entries are checked against its certificate.
        store.perform(effects, for: peer)
        wake()
    }

    /// Checks every entry, applies those that pass as one batch, and tells the peer about
    /// the others: one bad entry is refused alone, and the link stays up.
    private func apply(_ delta: SyncMessage.Delta, to store: SyncStore, initial: Bool) async throws {
        let checked = await store.check(delta)
        // An honest device never sends an entry whose signature fails; one that keeps doing so
        // is made to pay a new connection (a TLS handshake) for every few of them.
        let forged = checked.refused.filter { [.badSignature, .unknownSigner, .originMismatch].contains($0.reason) }.count
        if state.noteForged(forged) {
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
        acknowledge(delta.vector, of: store.identifier, in: store, known: true, saved: false, ours: applied)
        let refused = checked.refused + overQuota
        if !refused.isEmpty {
            let count = delta.entries.count + delta.undecodable.count
            // The peer is told each time; the log, once a minute (a peer may send them without end).
            context.limitedLog.log(.warning, "refused \(refused.count) of \(count) entries from the peer, applied the rest, and told the peer: \(Self.summary(refused))",
                                   kind: "refused entries of \(store.identifier)", peer: "\(peer.deviceID)", to: store.logger, metadata: ["peer": "\(peer)"])
        }
        // The writer is woken only for what goes out now: an ack alone waits (SessionMailbox.holdsAcks).
        let effects = state.deltaApplied(store.identifier, carried: delta.entries.count + delta.undecodable.count,
                                         accepted: checked.accepted, changed: !changed.isEmpty, refused: refused,
                                         clock: replica.wallMilliseconds(), applied: applied, senderHas: delta.vector)
        if state.mailbox.hasSendable { wake() }
        if state.mailbox.heldAcksNeedTimer() { armAckTimer() }
        if !changed.isEmpty { store.logger.debug("applied \(checked.accepted.count) entries; changed \(changed.count) keys") }
        engine?.route(effects, from: peer.deviceID, in: store)
    }

    /// The first few items, for a log line.
    static func summary(_ items: [some CustomStringConvertible]) -> String {
        items.prefix(8).map(\.description).joined(separator: "; ") + (items.count > 8 ? "; …" : "")
    }
}
