import Foundation
import HearthCore
import HearthIdentity

// The stores an engine serves: attached and detached while it runs, each announced on every
// connection to a peer that serves it too.
extension SyncEngine {
    /// Starts serving `replica`'s store: connected peers that serve it are told at once, and
    /// every later connection carries it.
    ///
    /// - Throws: ``SyncEngineError`` if the engine is stopped, serves this store already or
    ///   ``SyncMessage/maximumStores`` stores, or the identifier cannot go on the wire.
    ///
    /// With `onlyFor`, the store is synced with that peer alone (and with any other that
    /// names it too), never listed in a hello nor announced to others: a store a peer named
    /// and this device holds in memory only, which must not spread to the others by this
    /// device's word.
    @discardableResult
    package func attach(_ replica: any SyncReplica, onlyFor peer: DeviceID? = nil) throws(SyncEngineError) -> SyncStore {
        let identifier = replica.storeIdentifier
        guard !identifier.isEmpty, identifier.utf8.count <= SyncMessage.maximumStoreIdentifierBytes else {
            throw .invalidStoreIdentifier(identifier)
        }
        let store = SyncStore(replica: replica, identity: identity, certificates: certificates, logger: logger, engine: self)
        // The certificates saved with the replica: this run can relay entries of devices it
        // has not met (yet), as the run that received them could. Each is checked again.
        for (signer, der) in replica.signerCertificates {
            do {
                try certificates.admit(derEncoded: der)
            } catch {
                store.logger.warning("ignoring the saved certificate of device \(Hex.encode(signer.prefix(4))): \(error)")
            }
        }
        let sessions = try state.withLock { s throws(SyncEngineError) -> [SyncSession] in
            guard !s.stopped else { throw .stopped() }
            guard s.stores[identifier] == nil else { throw .alreadyAttached(identifier) }
            guard s.stores.count < SyncMessage.maximumStores else { throw .tooManyStores() }
            s.stores[identifier] = store
            if let peer { s.peerOnly[identifier] = peer }
            return s.sessions.sessions.filter { peer == nil || $0.peer.deviceID == peer }
        }
        store.replica.onLocalChange { [weak self] in self?.changed(identifier) }
        for session in sessions { session.announce(store) }
        store.logger.debug("attached")
        return store
    }

    /// Stops serving a store: connected peers are told, and once this returns no session
    /// changes its replica any more (see ``ReplicaGate``). The engine runs on for the others.
    package func detach(storeIdentifier: String) {
        let (store, sessions) = state.withLock { s in
            s.peerOnly[storeIdentifier] = nil
            return (s.stores.removeValue(forKey: storeIdentifier), s.sessions.sessions)
        }
        guard let store else { return }
        store.replica.close()
        for session in sessions { session.leave(storeIdentifier) }
        store.logger.debug("detached")
    }

    /// The attached store of this identifier, if any.
    package func store(_ identifier: String) -> SyncStore? {
        state.withLock { $0.stores[identifier] }
    }

    /// The identifiers of the attached stores.
    package var storeIdentifiers: [String] {
        state.withLock { $0.stores.keys.sorted() }
    }

    /// Whether the store may be announced to `peer`: attached, and not for another peer only.
    func announces(_ identifier: String, to peer: DeviceID) -> Bool {
        state.withLock { s in s.stores[identifier] != nil && (s.peerOnly[identifier].map { $0 == peer } ?? true) }
    }

    /// Supplies the replica of a store a peer serves and this device does not, or `nil` to
    /// ignore it: a device daemon sets it to keep the stores of the account (a hub keeps the
    /// household's data for devices that come and go). It is given the store and the peer
    /// device that named it, so that it can bound what each peer makes this device take up
    /// (`DeviceSync`). Called off a connection's event loop, it should return promptly (no network).
    package var storeProvider: (@Sendable (String, DeviceID) -> (any SyncReplica)?)? {
        get { provider.withLock { $0 } }
        set { provider.withLock { $0 = newValue } }
    }

    /// Told that a peer serves a store this device serves too (from its hello or a `store`
    /// message): a device daemon forgives a store it took up for one peer once a second member
    /// serves it (`DeviceSync`). Called off the event loop; must return promptly.
    package var onStoreServed: (@Sendable (String, DeviceID) -> Void)? {
        get { servedHandler.withLock { $0 } }
        set { servedHandler.withLock { $0 = newValue } }
    }

    /// `peer` serves `identifier`: tells ``onStoreServed`` if this device serves it too.
    func served(_ identifier: String, by peer: DeviceID) {
        guard let handler = servedHandler.withLock({ $0 }), store(identifier) != nil else { return }
        handler(identifier, peer)
    }

    /// The store of this identifier, attached now from the ``storeProvider`` if it supplies one
    /// for `peer`, the device that named it.
    func provide(_ identifier: String, for peer: DeviceID) -> SyncStore? {
        guard let provider = provider.withLock({ $0 }), let replica = provider(identifier, peer) else { return nil }
        guard replica.storeIdentifier == identifier else {
            logger.warning("the store provider returned store \(String(reflecting: replica.storeIdentifier)) for \(String(reflecting: identifier)); ignored")
            return nil
        }
        do {
            let store = try attach(replica)
            store.logger.info("serving a store a peer serves, from the store provider")
            return store
        } catch where error.code == .alreadyAttached {
            return store(identifier)
        } catch {
            logger.warning("cannot serve store \(String(reflecting: identifier)) from the store provider: \(error)")
            return nil
        }
    }

    /// The sessions that sync `store` right now.
    func sessions(sharing store: String) -> [SyncSession] {
        state.withLock { $0.sessions.sessions }.filter { $0.shares(store) }
    }

    /// This device's hello: every store it serves, by digests (TLS has authenticated the
    /// device: the hello is not signed).
    func makeHello() -> SyncMessage.Hello {
        let stores = state.withLock { s in s.stores.keys.sorted().filter { s.peerOnly[$0] == nil }.compactMap { s.stores[$0] } }
        var inlineBytes = 0
        let listed = stores.map { store in
            var (listing, vector) = store.announcement()
            // Small vectors go in the hello, while the hello's budget for them lasts.
            if vector.counters.count <= SyncMessage.Hello.maximumInlineOrigins {
                let size = vector.packed.count
                if inlineBytes + size <= SyncMessage.Hello.maximumInlineBytes {
                    inlineBytes += size
                    listing.vector = vector
                }
            }
            return listing
        }
        return SyncMessage.Hello(account: Data(identity.account.id.bytes), stores: listed, removalsDigest: removals.digest)
    }
}
