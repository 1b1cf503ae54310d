import Foundation
import HearthCore
import HearthIdentity

// The stores an engine serves: attached and detached while it runs, each announced on every
// connection to a peer that serves it too.
extension SyncEngine {
    /// Starts serving `replica`'s store: connected peers that serve it are told at once, and
    /// every later connection carries it.
    ///
    /// - Throws: ``SyncEngineError``: engine stopped, store served already, too many stores, an
    ///   identifier unfit for the wire, or `stillWanted` (asked under the stores' lock) said no.
    ///
    /// With `onlyFor`, the store is synced with that peer alone (and with any other that
    /// names it too), never listed in a hello nor announced to others: a store a peer named
    /// and this device holds in memory only, which must not spread by this device's word.
    @discardableResult
    package func attach(_ replica: any SyncReplica, onlyFor peer: DeviceID? = nil,
                        while stillWanted: (@Sendable () -> Bool)? = nil) throws(SyncEngineError) -> SyncStore {
        try attachedStores.attach(replica, onlyFor: peer, while: stillWanted, to: self)
    }

    /// Stops serving a store: connected peers are told, and once this returns no session
    /// changes its replica any more (see ``ReplicaGate``). The engine runs on for the others.
    package func detach(storeIdentifier: String) {
        guard let store = attachedStores.remove(storeIdentifier) else { return }
        store.replica.close()
        for session in sessions { session.leave(storeIdentifier) }
        store.logger.debug("detached")
    }

    /// The attached store of this identifier, if any.
    package func store(_ identifier: String) -> SyncStore? { attachedStores[identifier] }

    /// The identifiers of the attached stores.
    package var storeIdentifiers: [String] { attachedStores.identifiers }

    /// Whether the store may be announced to `peer`: attached, and not for another peer only.
    func announces(_ identifier: String, to peer: DeviceID) -> Bool { attachedStores.announces(identifier, to: peer) }

    /// Supplies the replica of a store a peer serves and this device does not, or `nil` to
    /// ignore it: a device daemon sets it to keep the stores of the account (a hub keeps the
    /// household's data for devices that come and go). It is given the store and the peer
    /// device that named it, so that it can bound what each peer makes this device take up
    /// (`DeviceSync`). Called off a connection's event loop, it should return promptly (no network).
    package var storeProvider: (@Sendable (String, DeviceID) -> (any SyncReplica)?)? {
        get { attachedStores.provider.withLock { $0 } }
        set { attachedStores.provider.withLock { $0 = newValue } }
    }

    /// Told that a peer serves a store this device serves too (from its hello or a `store`
    /// message): a device daemon forgives a store it took up for one peer once a second member
    /// serves it (`DeviceSync`). Called off the event loop; must return promptly.
    package var onStoreServed: (@Sendable (String, DeviceID) -> Void)? {
        get { attachedStores.servedHandler.withLock { $0 } }
        set { attachedStores.servedHandler.withLock { $0 = newValue } }
    }

    /// `peer` serves `identifier`: tells ``onStoreServed`` if this device serves it too.
    func served(_ identifier: String, by peer: DeviceID) {
        guard let handler = onStoreServed, store(identifier) != nil else { return }
        handler(identifier, peer)
    }

    /// The store of this identifier, attached now from the ``storeProvider`` if it supplies one
    /// for `peer`, the device that named it.
    func provide(_ identifier: String, for peer: DeviceID) -> SyncStore? { attachedStores.provide(identifier, for: peer, to: self) }

    /// The sessions now, and those that sync `store` now.
    var sessions: [SyncSession] { sessionTable.sessions }
    func sessions(sharing store: String) -> [SyncSession] { sessions.filter { $0.shares(store) } }

    /// This device's hello (``EngineStores/hello(account:removalsDigest:)``).
    func makeHello() -> SyncMessage.Hello {
        attachedStores.hello(account: Data(identity.account.id.bytes), removalsDigest: removals.digest)
    }
}
