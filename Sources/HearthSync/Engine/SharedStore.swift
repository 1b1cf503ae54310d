import Foundation
import HearthCore
import HearthIdentity

// The values a session's state (``SessionState``) is made of and answers with.

/// A store both ends serve, as one connection (``SessionState``) sees it.
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
    /// needed): from then on we relay direct first (``SessionState/deltaBasis(of:)``). The first is
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
    /// The peer asked us for the whole store on this connection (answered once per connection).
    package var gaveWhole = false

    package init(store: Store) { self.store = store }
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
}
