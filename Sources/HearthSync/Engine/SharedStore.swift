import Foundation
import HearthCore
import HearthIdentity

// The values a session's state (``SessionState``) is made of and answers with.

/// A store both ends serve, as one connection (``SessionState``) sees it: what the peer has of
/// it and what it was told and sent, and the decisions that concern this store alone (taking the
/// peer's vector, its acks and claims, the first batch, the whole store asked for, what a delta
/// is computed against and what it sent). The state finds the store by name and asks it.
package struct SharedStore<Store: Sendable>: Sendable {
    package let store: Store
    /// Whether we know what the peer has of it (equal hello digests, or its `store`
    /// message): deltas wait until then.
    package var ready = false
    /// What the peer is known to have: its vector, what we sent, what it acknowledged.
    package var peerKnown = VersionVector()
    /// What the peer has confirmed having (its vector, acks and pings).
    package var acknowledged = VersionVector()
    /// The last vector of ours the peer was told (hello digest, state or ack).
    package var told: VersionVector?
    /// The last vector of what we saved the peer was told (an ack's, a ping's, a pong's or
    /// links'): a ping carries it again once it changed, so that the peer collects tombstones.
    package var toldSaved: VersionVector?
    /// Whether our `store` message has been sent (or posted) on this connection.
    package var sentState = false
    /// Certificates sent with this store's deltas: the peer keeps them, so each goes once.
    package var sentCertificates = Set<Data>()
    /// Whether the deltas received so far are the first batch (the initial download),
    /// which lasts until a delta without `more`.
    package var inFirstBatch = true
    /// Whether our first delta of the store on this connection was sent (or none was
    /// needed): from then on we relay direct first (``deltaBasis(peerLinks:)``). The first is
    /// whole, so that a newcomer's initial download from any one peer is complete.
    package var relaying = false
    /// What we did not relay because a device the peer is linked to wrote it, and so
    /// pushes it to the peer itself: taken as the peer's until the peer says that link
    /// is gone (``SessionState/peerLinked(_:)``) or that device leaves the store (``SessionState/forgetDeferred(_:of:)``).
    package var deferred = VersionVector()
    /// What the peer said it has of origins we did not know yet (at most
    /// ``SessionState/maximumUnknownClaims``): noted once we know them (``SessionState/claimsNowKnown(of:in:)``).
    /// Otherwise a peer that got an entry directly from its writer, and told us before we
    /// had it, would never be known to have it: nothing else would make it tell again.
    package var unknownClaims = VersionVector()
    /// Those of ``unknownClaims`` the peer said it has saved: only these count, once known, for
    /// tombstone collection.
    package var unknownSavedClaims = VersionVector()
    /// Our next `store` message asks the peer for its whole store (`w`): we dropped a removed
    /// device's later writes, and the entries they had replaced are covered by our vector.
    package var askWhole = false
    /// We asked for the whole store and its last delta has not come yet.
    package var awaitingWhole = false
    /// How many times the peer had the whole store on this connection (at most
    /// ``maximumWholes``).
    package var wholesGiven = 0
    /// How many whole stores a peer is sent per store and connection: a device asks once per
    /// removed device whose writes it dropped, once per re-stamp it made or took, and once per
    /// entry it held back that its clock, set right, now accepts (docs/protocol.md, "A clock set
    /// right again"); a peer asking again and again pays a connection per few stores it gets.
    package static var maximumWholes: Int { 8 }
    /// A whole store went to the peer on this connection (asked, or with our own request).
    package var gaveWhole = false

    package init(store: Store) { self.store = store }

    /// How many counters of origins we do not know yet are kept per store from a peer's claims:
    /// an honest peer's are the few writers whose entries are on their way to us; a lying peer
    /// fills only its own slots.
    package static var maximumUnknownClaims: Int { 64 }

    // MARK: What the peer has of it (``SessionState`` finds the store and asks it)

    /// The peer's hello has the same digest as ours: it has exactly what we have (`view`).
    /// Nothing to tell, nothing to send (and no first download to make whole: relay direct first
    /// at once); `effects` gets what the replica is to do.
    mutating func same(_ view: SessionReplicaView, effects: inout [SessionReplicaEffect]) {
        ready = true
        relaying = true
        peerKnown = view.vector
        acknowledged = view.vector
        told = view.vector
        // Known from now on: tombstones it lacks are kept until it has them. Known with
        // nothing saved: a hello says what the peer has, not what it keeps through a crash
        // (its first ping says that).
        effects.append(.notePeer(acknowledged: VersionVector()))
        // The peer has nothing we lack: the first download is done, and empty.
        if view.awaitingInitialSync { effects.append(.initialSyncCompleted) }
    }

    /// The peer has `vector` (its hello or its `store` message said so): the store is ready to
    /// send deltas, and what the peer has is noted; `effects` gets what the replica is to do.
    mutating func take(_ vector: VersionVector, view: SessionReplicaView, effects: inout [SessionReplicaEffect]) {
        let claimed = vector.restricted(to: view.vector)
        ready = true
        peerKnown.formUnion(claimed)
        acknowledged.formUnion(claimed)
        Self.keepUnknownClaims(vector, in: &unknownClaims, ours: view.vector)
        // Known, with nothing saved: its hello or state says what it has, not what it keeps.
        effects.append(.notePeer(acknowledged: VersionVector()))
        // The peer has nothing we lack: the first download is done, and empty.
        if view.awaitingInitialSync, view.vector.dominates(vector) { effects.append(.initialSyncCompleted) }
    }

    /// The peer has `vector` (restricted to origins we know): from its ack or delta (`known`: it
    /// has what we sent too) or its ping.
    mutating func peerHas(_ vector: VersionVector, known: Bool) {
        if known { peerKnown.formUnion(vector) }
        acknowledged.formUnion(vector)
    }

    /// The peer says it has `claimed`: its ack or a delta's vector (`known`: it has what we sent
    /// too), or its ping's or links' (only what it says). Counters of origins `ours` does not
    /// name are kept aside (bounded, ``claimsNowKnown(in:)``); the rest is noted (settling).
    /// `saved`: the peer has saved it (an ack's `durable`, a ping's, a pong's or links' vectors):
    /// then it is returned for the replica's tombstone collection. An ack's or a delta's vector
    /// says what the peer holds in memory: collected on that, a tombstone the peer then lost in a
    /// crash would never reach it again, and the value it removed would live on there
    /// (docs/simulator.md, finding 1). Nil if not saved.
    mutating func acknowledge(_ claimed: VersionVector, ours: VersionVector, known: Bool, saved: Bool) -> SessionReplicaEffect? {
        let vector = claimed.restricted(to: ours)
        keepUnknownClaims(claimed, ours: ours, saved: saved)
        peerHas(vector, known: known)
        return saved ? .notePeer(acknowledged: vector) : nil
    }

    /// The peer's ack: it holds `ack.vector` (it has what we sent), and has saved `ack.saved`,
    /// which alone counts for tombstone collection (``acknowledge(_:ours:known:saved:)``).
    mutating func acknowledged(_ ack: SyncMessage.Ack, ours: VersionVector) -> [SessionReplicaEffect] {
        var effects: [SessionReplicaEffect] = []
        if let held = acknowledge(ack.vector, ours: ours, known: true, saved: ack.durable == nil) { effects.append(held) }
        if let durable = ack.durable, let saved = acknowledge(durable, ours: ours, known: false, saved: true) {
            effects.append(saved)
        }
        return effects
    }

    /// Keeps what the peer claimed for origins `ours` does not name yet (bounded); `saved`: it
    /// said it has saved it.
    mutating func keepUnknownClaims(_ claimed: VersionVector, ours: VersionVector, saved: Bool) {
        Self.keepUnknownClaims(claimed, in: &unknownClaims, ours: ours)
        if saved { Self.keepUnknownClaims(claimed, in: &unknownSavedClaims, ours: ours) }
    }

    private static func keepUnknownClaims(_ claimed: VersionVector, in kept: inout VersionVector, ours: VersionVector) {
        let unknown = claimed.counters.filter { ours.counters[$0.key] == nil }
        guard !unknown.isEmpty else { return }
        for (origin, counter) in unknown where kept.counters[origin] != nil || kept.counters.count < maximumUnknownClaims {
            kept.advance(origin: origin, to: counter)
        }
    }

    /// The kept claims about origins `ours` now names (taken out of the kept ones), now noted as
    /// acknowledged; returned, those the peer said it saved (for tombstone collection), nil if
    /// there are none.
    mutating func claimsNowKnown(in ours: VersionVector) -> VersionVector? {
        let kept = unknownClaims
        guard !kept.counters.isEmpty else { return nil }
        let known = kept.restricted(to: ours)
        guard !known.counters.isEmpty else { return nil }
        unknownClaims = kept.filter { ours.counters[$0] == nil }
        acknowledged.formUnion(known)
        let savedKept = unknownSavedClaims
        let saved = savedKept.restricted(to: ours)
        guard !saved.counters.isEmpty else { return nil }
        unknownSavedClaims = savedKept.filter { ours.counters[$0] == nil }
        return saved
    }

    // MARK: What is sent and received of it

    /// The peer asked for the whole store in its `store` message: it dropped entries its vector
    /// still covers (a removed device's later writes, entries a re-stamp had beaten, entries it
    /// held back), so it is sent everything, as a newcomer is, whatever it was sent before. At
    /// most ``maximumWholes`` times per connection. Returns whether no whole store had gone to
    /// the peer on this connection yet (its own is then wanted in turn:
    /// ``SessionReplicaEffect/wantWhole``; not when it answers our own request).
    @discardableResult
    mutating func giveWhole() -> Bool {
        guard wholesGiven < Self.maximumWholes else { return false }
        wholesGiven += 1
        let first = !gaveWhole
        sendWhole()
        return first
    }

    /// Our own request for the peer's whole store carries ours whole, once per connection, and
    /// not counted against ``maximumWholes`` (which bounds what a peer's requests cost us).
    mutating func giveWholeWithRequest() {
        if !gaveWhole { sendWhole() }
    }

    private mutating func sendWhole() {
        gaveWhole = true
        peerKnown = VersionVector()
        deferred = VersionVector()
        relaying = false
    }

    /// A delta arrived: whether it belongs to the first batch (the initial download, which ends
    /// with a delta without `more`).
    mutating func deltaArrived(more: Bool) -> Bool {
        let first = inFirstBatch
        if !more { inFirstBatch = false }
        return first
    }

    /// Our `store` message is being sent: whether it asks for the whole store.
    mutating func takeWholeRequest() -> Bool {
        guard askWhole else { return false }
        askWhole = false
        awaitingWhole = true
        return true
    }

    /// A delta arrived: true once the whole store we asked for is in (its last delta).
    mutating func wholeArrived(more: Bool) -> Bool {
        guard awaitingWhole, !more else { return false }
        awaitingWhole = false
        return true
    }

    /// What to compute a delta against: the store; what the peer is known to have, with what we
    /// deferred to its links; and the devices it is linked to (`peerLinks`), whose own writes we
    /// leave to them (none for the first delta, which is whole). Nil until the store is ready.
    func deltaBasis(peerLinks: Set<DeviceID>) -> (store: Store, peerKnown: VersionVector, linked: Set<DeviceID>)? {
        guard ready else { return nil }
        return (store, peerKnown.union(deferred), relaying ? peerLinks : [])
    }

    /// Of the certificates a delta part could carry, those the peer was not sent yet (now
    /// counted as sent).
    mutating func certificatesToSend(_ candidates: [Data]) -> [Data] {
        let fresh = candidates.filter { !sentCertificates.contains($0) }
        sentCertificates.formUnion(fresh)
        return fresh
    }

    /// A delta up to `vector` was sent (or none was needed, `vector` then empty): the peer is
    /// known to have it; what is in `deferred` was left to the peer's links. From now on the
    /// store's deltas are relayed direct first.
    mutating func deltaSent(_ vector: VersionVector, deferred: VersionVector) {
        peerKnown.formUnion(vector)
        self.deferred.formUnion(deferred)
        relaying = true
    }

    /// What we deferred to devices of other prefixes than these (the store's sharers now) is owed
    /// again: a writer that no longer syncs with us is not left out of our deltas, so its later
    /// writes we relay would otherwise go from the deferred counter up, and the peer's vector,
    /// advanced to each, would cover the earlier ones left to its own link to the writer, which
    /// it may never have got (docs/protocol.md, "Relays, direct first").
    mutating func keepDeferred(of prefixes: Set<UInt64>) {
        if deferred.counters.keys.contains(where: { !prefixes.contains($0.devicePrefix) }) {
            deferred = deferred.filter { prefixes.contains($0.devicePrefix) }
        }
    }

    /// What we deferred to the devices of these prefixes is owed again (the peer's link to them
    /// is gone, or they left the store); false if there was none.
    mutating func forgetDeferred(of prefixes: Set<UInt64>) -> Bool {
        let kept = deferred.filter { !prefixes.contains($0.devicePrefix) }
        guard kept != deferred else { return false }
        deferred = kept
        return true
    }
}

/// Renewals on this connection: whether the peer understands them, whether we asked it for
/// a certificate, whether it asked us (kept, so a CA unlocked later can still answer), and
/// whether we issued it one (once per connection).
package struct SessionRenewal: Sendable, Equatable {
    package var peerRenews = false
    package var asked = false
    package var askedByPeer = false
    package var issued = false
}

/// What a decision needs to know of a store's replica (read outside the session's lock).
package struct SessionReplicaView: Sendable {
    package var vector: VersionVector
    package var awaitingInitialSync: Bool
    /// The replica dropped a removed device's later writes and wants its peers' whole store
    /// (``SessionState/askForWhole(_:)``).
    package var wantsWhole: Bool

    package init(vector: VersionVector, awaitingInitialSync: Bool = false, wantsWhole: Bool = false) {
        self.vector = vector
        self.awaitingInitialSync = awaitingInitialSync
        self.wantsWhole = wantsWhole
    }
}

/// What the shell must do to a store's replica after a decision, in order.
package enum SessionReplicaEffect: Sendable, Equatable {
    /// Admit the peer's certificate for the store's signature checks.
    case keepPeerCertificate
    /// The peer knows of these devices in the store (ours left out).
    case learnOfDevices([DeviceID])
    /// The peer has saved this much of the store (for tombstone collection; with nothing, the
    /// peer is known, so that no tombstone goes before it has saved it).
    case notePeer(acknowledged: VersionVector)
    /// The first download is done (the peer had nothing we lacked).
    case initialSyncCompleted
    /// The peer asked for our whole store (it dropped a removed device's later writes): its
    /// own is wanted too (``SyncReplica/wantWhole()``).
    case wantWhole
}
