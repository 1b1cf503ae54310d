import Foundation
import HearthCore
import HearthIdentity
import HearthSync

/// A device daemon's hold on this device's sync: the engine of the signed-in account (its
/// listener, its mDNS service, one connection per peer device) kept up whether or not a store
/// is open, and taking up every store a peer device serves that this device has not opened.
///
/// The stores the daemon opens with the same configuration share this engine. A store a peer
/// offers is opened with `open` (return `nil` to leave it alone) the first time the peer
/// mentions it, and synced from then on: an always-on device keeps the household's data for
/// the devices that come and go.
///
/// ```swift
/// let configuration = UbiquitousKeyValueStore.Configuration(sync: SyncSettings())
/// let sync = try DeviceSync.start(configuration: configuration) { identifier in
///     try? UbiquitousKeyValueStore(storeIdentifier: identifier, configuration: configuration)
/// }
/// // … later
/// await sync?.stop()
/// ```
package final class DeviceSync: Sendable {
    private let lease: SyncEngineRegistry.Lease
    /// The stores opened for peers: kept open for as long as this runs.
    private let adopted = Locked<[String: UbiquitousKeyValueStore]>([:])

    /// The account's device ID this engine syncs as.
    package let deviceID: String

    /// Starts (or joins) the engine for `configuration`'s signed-in account; `nil` when sync is
    /// off or nobody is signed in.
    package static func start(configuration: UbiquitousKeyValueStore.Configuration,
                             open: @escaping @Sendable (String) -> UbiquitousKeyValueStore?) throws(KeyValueStoreError) -> DeviceSync? {
        guard let identity = StoreRegistry.signedInIdentity(configuration) else { return nil }
        let lease: SyncEngineRegistry.Lease
        do {
            lease = try SyncEngineRegistry.shared.acquire(identity: identity, settings: configuration.sync, logger: configuration.logger)
        } catch {
            throw KeyValueStoreError(code: .syncUnavailable, key: nil, reason: "cannot start this device's sync: \(error)")
        }
        let sync = DeviceSync(lease: lease, deviceID: identity.deviceID.hex)
        let adopted = sync.adopted
        lease.engine.storeProvider = { identifier in
            // Opening attaches the store to this engine (same identity and settings): hand
            // back its replica, which the engine finds attached already.
            guard let store = open(identifier) else { return nil }
            adopted.withLock { $0[identifier] = store }
            return store.backend
        }
        return sync
    }

    private init(lease: SyncEngineRegistry.Lease, deviceID: String) {
        self.lease = lease
        self.deviceID = deviceID
    }

    /// The port the engine listens on, once it does.
    package var port: Int {
        get async throws { try await lease.started.value }
    }

    /// The stores opened because a peer served them, by identifier.
    package var adoptedStores: [String: UbiquitousKeyValueStore] { adopted.withLock { $0 } }

    /// The account CA unlocked here (the owner entered the passphrase): peers' certificate
    /// renewals are answered for as long as this device syncs (see `SyncEngine.authority`).
    package var authority: AccountAuthority? {
        get { lease.engine.authority }
        set { lease.engine.authority = newValue }
    }

    /// Stops taking up stores and lets go of the engine (it stops with the last store using it).
    package func stop() async {
        lease.engine.storeProvider = nil
        await SyncEngineRegistry.shared.release(lease)
    }
}
