import Foundation
import HearthCore
import HearthIdentity

/// The stores an engine serves: attached and detached while it runs, each announced on every
/// connection to a peer that serves it too, and those the store provider takes up for a peer.
/// The engine owns one (its package API forwards here); the sessions are the engine's.
final class EngineStores: Sendable {
    private struct State {
        var stores: [String: SyncStore] = [:]
        /// Stores attached for one peer only (a store that peer named, taken up in memory):
        /// neither in hellos nor announced to other peers, who would otherwise take them up
        /// too, charged to this device (see ``attach(_:onlyFor:to:)``).
        var peerOnly: [String: DeviceID] = [:]
        /// Set by ``closeAll()`` (the engine stopped): nothing is attached any more.
        var closed = false
    }

    private let state = Locked(State())
    let provider = Locked<(@Sendable (String, DeviceID) -> (any SyncReplica)?)?>(nil)
    let servedHandler = Locked<(@Sendable (String, DeviceID) -> Void)?>(nil)

    subscript(identifier: String) -> SyncStore? { state.withLock { $0.stores[identifier] } }
    var identifiers: [String] { state.withLock { $0.stores.keys.sorted() } }
    /// Every store attached now.
    var all: [SyncStore] { state.withLock { Array($0.stores.values) } }

    /// See ``SyncEngine/attach(_:onlyFor:)``. The store goes in first, then the sessions are
    /// read: one registered in between finds it in the table and is announced it twice, which
    /// ``SessionState/announce(_:named:)`` ignores.
    func attach(_ replica: any SyncReplica, onlyFor peer: DeviceID?, while stillWanted: (@Sendable () -> Bool)? = nil,
                to engine: SyncEngine) throws(SyncEngineError) -> SyncStore {
        let identifier = replica.storeIdentifier
        guard !identifier.isEmpty, identifier.utf8.count <= SyncMessage.maximumStoreIdentifierBytes else {
            throw .invalidStoreIdentifier(identifier)
        }
        let store = SyncStore(replica: replica, identity: engine.identity, certificates: engine.certificates, logger: engine.logger, engine: engine)
        // Removals learned while the store was closed: their later writes go before any peer sees them.
        store.dropRemovedWrites(engine.removals.all)
        // The certificates saved with the replica: this run can relay entries of devices it
        // has not met (yet), as the run that received them could. Each is checked again.
        for (signer, der) in replica.signerCertificates {
            do {
                try engine.certificates.admit(derEncoded: der)
            } catch {
                store.logger.warning("ignoring the saved certificate of device \(Hex.encode(signer.prefix(4))): \(error)")
            }
        }
        try state.withLock { s throws(SyncEngineError) in
            guard !s.closed else { throw .stopped() }
            guard s.stores[identifier] == nil else { throw .alreadyAttached(identifier) }
            guard s.stores.count < SyncMessage.maximumStores else { throw .tooManyStores() }
            // Checked in the same step as the attach: a caller that may be told meanwhile not
            // to attach (a copy taken up in memory, claimed by the daemon) never attaches late.
            if let stillWanted, !stillWanted() { throw .withdrawn(identifier) }
            s.stores[identifier] = store
            if let peer { s.peerOnly[identifier] = peer }
        }
        store.replica.onLocalChange { [weak engine] in engine?.changed(identifier) }
        for session in engine.sessions where peer == nil || session.peer.deviceID == peer { session.announce(store) }
        store.logger.debug("attached")
        return store
    }

    /// Takes the store out (``SyncEngine/detach(storeIdentifier:)``); nil if it was not attached.
    func remove(_ identifier: String) -> SyncStore? {
        state.withLock { s in
            s.peerOnly[identifier] = nil
            return s.stores.removeValue(forKey: identifier)
        }
    }

    /// Takes every store out, for good (the engine stops).
    func closeAll() -> [SyncStore] {
        state.withLock { s in
            s.closed = true
            defer { s.stores = [:]; s.peerOnly = [:] }
            return Array(s.stores.values)
        }
    }

    /// Whether the store may be announced to `peer`: attached, and not for another peer only.
    func announces(_ identifier: String, to peer: DeviceID) -> Bool {
        state.withLock { s in s.stores[identifier] != nil && (s.peerOnly[identifier].map { $0 == peer } ?? true) }
    }

    /// The store of this identifier, attached now from the store provider if it supplies one
    /// for `peer`, the device that named it.
    func provide(_ identifier: String, for peer: DeviceID, to engine: SyncEngine) -> SyncStore? {
        guard let provider = provider.withLock({ $0 }), let replica = provider(identifier, peer) else { return nil }
        guard replica.storeIdentifier == identifier else {
            engine.logger.warning("the store provider returned store \(String(reflecting: replica.storeIdentifier)) for \(String(reflecting: identifier)); ignored")
            return nil
        }
        do {
            let store = try attach(replica, onlyFor: nil, to: engine)
            store.logger.info("serving a store a peer serves, from the store provider")
            return store
        } catch where error.code == .alreadyAttached {
            return self[identifier]
        } catch {
            engine.logger.warning("cannot serve store \(String(reflecting: identifier)) from the store provider: \(error)")
            return nil
        }
    }

    /// This device's hello: every store it serves but those for one peer only, by digests (TLS
    /// has authenticated the device: the hello is not signed), with small vectors inline while
    /// the hello's budget for them lasts.
    func hello(account: Data, removalsDigest: Data?) -> SyncMessage.Hello {
        let stores = state.withLock { s in s.stores.keys.sorted().filter { s.peerOnly[$0] == nil }.compactMap { s.stores[$0] } }
        var inlineBytes = 0
        let listed = stores.map { store in
            var (listing, vector) = store.announcement()
            if vector.counters.count <= SyncMessage.Hello.maximumInlineOrigins {
                let size = vector.packed.count
                if inlineBytes + size <= SyncMessage.Hello.maximumInlineBytes {
                    inlineBytes += size
                    listing.vector = vector
                }
            }
            return listing
        }
        return SyncMessage.Hello(account: account, stores: listed, removalsDigest: removalsDigest)
    }
}
