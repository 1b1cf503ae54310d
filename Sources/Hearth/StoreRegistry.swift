import Foundation
import HearthCore
import HearthIdentity

/// One ``StoreBackend`` per store file per process, so that every instance opened on the
/// same identifier sees the same data (the file lock would refuse a second one anyway).
enum StoreRegistry {
    private struct WeakBackend {
        weak var backend: StoreBackend?
    }

    private static let backends = Locked<[String: WeakBackend]>([:])

    /// Saves every open store when the process exits normally, as Apple's system does when
    /// an app quits: write-behind must not lose what the app wrote in its last second.
    private static let exitHook: Void = {
        atexit { StoreRegistry.flushAll() }
    }()

    static func backend(storeIdentifier: String, configuration: UbiquitousKeyValueStore.Configuration) throws(KeyValueStoreError) -> StoreBackend {
        guard !storeIdentifier.isEmpty else { return memoryBackend(storeIdentifier: storeIdentifier, configuration: configuration) }
        _ = exitHook
        let identity = signedInIdentity(configuration)
        let location = StoreLocation(dataDirectory: configuration.dataDirectory, storeIdentifier: storeIdentifier,
                                     account: identity?.account.id.hex)
        // Keyed by store, not by file: the file changes when the account does.
        let key = "\(configuration.dataDirectory)\u{0}\(storeIdentifier)"
        return try backends.withLock { (table) throws(KeyValueStoreError) -> StoreBackend in
            if let existing = table[key]?.backend { return existing }
            let backend = try open(location, configuration: configuration)
            table[key] = WeakBackend(backend: backend)
            if configuration.sync.isEnabled {
                if let identity { backend.startSync(identity: identity, settings: configuration.sync) }
                backend.watchAccount(settings: configuration.sync)
            }
            return backend
        }
    }

    /// The device identity of the signed-in account, if syncing is enabled and someone is
    /// signed in. Problems with the account files are logged; the store then works locally.
    private static func signedInIdentity(_ configuration: UbiquitousKeyValueStore.Configuration) -> DeviceIdentity? {
        guard configuration.sync.isEnabled else { return nil }
        let accounts = configuration.sync.accountDirectory.map { AccountStore(directory: URL(fileURLWithPath: $0)) } ?? AccountStore()
        do {
            return try accounts.loadCurrentIdentity()
        } catch {
            configuration.logger.error("cannot load the signed-in account; the store stays local: \(error)")
            return nil
        }
    }

    static func memoryBackend(storeIdentifier: String, configuration: UbiquitousKeyValueStore.Configuration) -> StoreBackend {
        StoreBackend(storeIdentifier: storeIdentifier, storage: nil, replica: Replica(),
                     logger: configuration.logger, writeBehindDelay: configuration.writeBehindDelay)
    }

    private static func open(_ location: StoreLocation, configuration: UbiquitousKeyValueStore.Configuration) throws(KeyValueStoreError) -> StoreBackend {
        do {
            let (storage, replica) = try StoreBackend.openReplica(location, logger: configuration.logger)
            return StoreBackend(storeIdentifier: location.storeIdentifier, storage: storage, replica: replica,
                                logger: configuration.logger, writeBehindDelay: configuration.writeBehindDelay,
                                clockSkew: configuration.clockSkew, dataDirectory: configuration.dataDirectory)
        } catch {
            let code: KeyValueStoreError.Code = error.code == .locked ? .storeLocked : .persistenceFailed
            throw KeyValueStoreError(code: code, key: nil, reason: error.description)
        }
    }

    /// Drops `backend` from the table (after ``StoreBackend/close()``).
    static func forget(_ backend: StoreBackend) {
        backends.withLock { table in
            table = table.filter { $0.value.backend != nil && $0.value.backend !== backend }
        }
    }

    static func flushAll() {
        let open = backends.withLock { $0.values.compactMap(\.backend) }
        for backend in open { _ = backend.flush() }
    }
}
