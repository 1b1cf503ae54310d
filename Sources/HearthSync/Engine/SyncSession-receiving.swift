import Foundation
import HearthCore
import HearthIdentity

// What a session does with the messages that arrive after the hello.
extension SyncSession {
    func handle(_ message: SyncMessage) async throws {
        switch message {
        case .hello: throw SyncProtocolError("a second hello")
        case .pong: return
        case .ping(let vectors):
            for (store, claimed) in vectors { acknowledge(claimed, of: store) }
            post { $0.pong = true }
            return
        case .store(let state):
            receive(state)
            return
        case .removals(let records):
            engine?.learn(records, from: self)
            return
        case .renew:
            engine?.renewalAsked(by: self)
            return
        case .certificate(let der):
            engine?.renewed(der, from: self)
            return
        case .delta, .ack, .refused: break
        }
        // A message about a store this connection does not sync (the peer serves a store this
        // device does not, or one just detached) is ignored: the others go on.
        guard let name = message.storeIdentifier, let shared = stores.withLock({ $0.shared[name] }) else {
            logger.debug("ignoring a message about store \(String(reflecting: message.storeIdentifier ?? "")), not synced on this connection")
            return
        }
        switch message {
        case .delta(let delta):
            let initial = stores.withLock { s -> Bool in
                guard let first = s.shared[name]?.inFirstBatch else { return false }
                if !delta.more { s.shared[name]?.inFirstBatch = false }
                return first
            }
            try await apply(delta, to: shared.store, initial: initial)
        case .ack(let ack):
            let vector = ack.vector.restricted(to: shared.store.replica.syncVector)
            stores.withLock { $0.shared[name]?.peerKnown.formUnion(vector) }
            acknowledge(vector, of: name)
        case .refused(let refusal):
            let fresh = shared.store.note(refusal, from: peer.deviceID)
            guard !fresh.isEmpty else { return }
            shared.store.logger.warning("the peer refused \(fresh.count) entr\(fresh.count == 1 ? "y" : "ies") this device sent; the rest was applied: \(Self.summary(fresh))",
                                        metadata: ["peer": "\(peer)"])
        case .hello, .ping, .pong, .store, .removals, .renew, .certificate: break
        }
    }

    /// Records that the peer has what `claimed` says of `store` (counters of origins we do not
    /// know are dropped), for settling and tombstone collection.
    private func acknowledge(_ claimed: VersionVector, of store: String) {
        guard let shared = stores.withLock({ $0.shared[store] }) else { return }
        let vector = claimed.restricted(to: shared.store.replica.syncVector)
        stores.withLock { $0.shared[store]?.acknowledged.formUnion(vector) }
        shared.store.replica.notePeer(peer.deviceID.hex, acknowledged: vector)
    }

    /// The peer's state of one store: it serves it (with this vector, knowing these devices),
    /// or no longer does.
    func receive(_ state: SyncMessage.StoreState) {
        let name = state.store
        if state.left {
            stores.withLock { s in
                s.served.remove(name)
                s.shared[name] = nil
                s.ignored[name] = nil
            }
            post(name) { $0 = SessionMailbox.StoreMail() }
            return
        }
        let known = stores.withLock { s -> Bool in
            guard s.served.contains(name) || s.served.count < SyncMessage.maximumStores else { return false }
            s.served.insert(name)
            return true
        }
        guard known else {
            logger.debug("ignoring store \(String(reflecting: name)): the peer already serves \(SyncMessage.maximumStores) stores")
            return
        }
        // Attaching a provided store announces it on this connection (and so opens it here).
        guard let store = engine?.store(name) ?? engine?.provide(name) else {
            logger.debug("ignoring the state of store \(String(reflecting: name)), which this device does not serve")
            // Bounded: `served` holds at most maximumStores names, and these are among them.
            if state.vector != nil { stores.withLock { $0.ignored[name] = state } }
            return
        }
        let (answer, isNew) = stores.withLock { s -> (Bool, Bool) in
            let isNew = s.shared[name] == nil
            var shared = s.shared[name] ?? Shared(store: store)
            defer { s.shared[name] = shared }
            guard state.vector != nil, !shared.sentState else { return (false, isNew) }
            shared.sentState = true
            return (true, isNew)
        }
        // Shared from now on, by the peer's word before ours (its state came before this device
        // announced the store, and announce() will find it shared): admit its certificate here,
        // or its own entries would fail as unknown signers (seen under load in DeviceEngineTests).
        if isNew { store.keep(peerCertificate: peer.certificate, of: peer.deviceID) }
        if let peers = state.peers {
            let ours = context.identity.deviceID.data
            store.replica.learnOfDevices(peers.filter { $0 != ours }.map { Hex.encode($0) })
        }
        guard let vector = state.vector else { return }
        let claimed = vector.restricted(to: store.replica.syncVector)
        stores.withLock { s in
            s.shared[name]?.ready = true
            s.shared[name]?.peerKnown.formUnion(claimed)
            s.shared[name]?.acknowledged.formUnion(claimed)
        }
        store.replica.notePeer(peer.deviceID.hex, acknowledged: claimed)
        // The peer has nothing we lack: the first download is done, and empty.
        if store.replica.awaitingInitialSync, store.replica.syncVector.dominates(vector) {
            store.replica.initialSyncCompleted()
        }
        post(name) { mail in
            mail.delta = true
            // Not told ours yet (our hello's digest matched theirs, or we had not heard of it): answer.
            if answer {
                mail.state = true
                mail.peers = mail.peers || state.peers != nil
            }
        }
    }

    /// Checks every entry, applies those that pass as one batch, and tells the peer about
    /// the others: one bad entry is refused alone, and the link stays up.
    private func apply(_ delta: SyncMessage.Delta, to store: SyncStore, initial: Bool) async throws {
        let checked = await store.check(delta)
        // An honest device never sends an entry whose signature fails; one that keeps doing so
        // is made to pay a new connection (a TLS handshake) for every few of them.
        let forged = checked.refused.filter { [.badSignature, .unknownSigner, .originMismatch].contains($0.reason) }.count
        if forged > 0, forgedEntries.withLock({ $0 += forged; return $0 }) > Self.maximumForgedEntries {
            throw SyncProtocolError("the peer sent more than \(Self.maximumForgedEntries) entries whose signature does not verify; closing")
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
        let claimed = delta.vector.restricted(to: applied)
        stores.withLock { s in
            s.shared[store.identifier]?.peerKnown.formUnion(claimed)
            s.shared[store.identifier]?.acknowledged.formUnion(claimed)
        }
        replica.notePeer(peer.deviceID.hex, acknowledged: claimed)
        let refused = checked.refused + overQuota
        if !refused.isEmpty {
            let count = delta.entries.count + delta.undecodable.count
            store.logger.warning("refused \(refused.count) of \(count) entries from the peer, applied the rest, and told the peer: \(Self.summary(refused))",
                                 metadata: ["peer": "\(peer)"])
            let clock = replica.wallMilliseconds()
            post(store.identifier) { mail in
                // Bounded like the message that carries them: past the cap the peer hears of the rest next time.
                mail.refused = Array((mail.refused + refused).prefix(SyncMessage.maximumRefusals))
                mail.refusedClock = clock
            }
        }
        // An empty delta teaches the peer nothing new about us: its hello already did.
        if !delta.entries.isEmpty || !delta.undecodable.isEmpty {
            post(store.identifier) { $0.ack = applied }
        }
        if !changed.isEmpty {
            store.logger.debug("applied \(checked.accepted.count) entries; changed \(changed.count) keys")
            // Relay: other peers may lack what this one brought.
            engine?.changed(store.identifier)
        }
    }

    /// The first few items, for a log line.
    static func summary(_ items: [some CustomStringConvertible]) -> String {
        items.prefix(8).map(\.description).joined(separator: "; ") + (items.count > 8 ? "; …" : "")
    }
}
