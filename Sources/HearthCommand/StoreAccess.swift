import Foundation
import Hearth
import HearthCore
import HearthIdentity

/// How commands reach a store: reads come straight from its file (so they work while
/// `hearth serve` holds the store open); writes and watching open the store and sync.
struct StoreAccess {
    let global: GlobalOptions
    let options: StoreOptions
    let storeIdentifier: String
    let identity: DeviceIdentity?

    init(global: GlobalOptions, options: StoreOptions) throws {
        self.global = global
        self.options = options
        storeIdentifier = try options.identifier()
        identity = try global.currentIdentity()
    }

    /// The file of this store for the signed-in account (or the signed-out replica).
    var location: StoreLocation {
        StoreLocation(dataDirectory: global.storeDataDirectory, storeIdentifier: storeIdentifier,
                      account: identity?.account.id.hex)
    }

    var exists: Bool { FileManager.default.fileExists(atPath: location.filePath) }

    /// Fails with "unknown store" unless this device has a file for the store.
    func requireExisting(hint: String) throws {
        guard exists else {
            let whose = identity.map { "account \($0.account.displayName) (\($0.account.id.short))" } ?? "signed out"
            throw CommandError(.unknownStore,
                               "unknown store \(storeIdentifier): no file for it under \(global.storeDataDirectory) (\(whose)); \(hint)")
        }
    }

    /// The store's values as its file holds them, without opening (locking) the store.
    func readReplica() throws -> Replica {
        try requireExisting(hint: "it appears once written on this device (hearth set) or synced here (hearth serve)")
        do {
            guard let data = try AtomicFile.read(location.filePath) else { throw CommandError(.unknownStore, "unknown store \(storeIdentifier)") }
            return try ReplicaFile.decode(data, path: location.filePath).0
        } catch let error as CommandError {
            throw error
        } catch {
            throw CommandError(.general, "cannot read \(location.filePath): \(error)")
        }
    }

    /// Opens the store, syncing if signed in.
    func open() throws -> UbiquitousKeyValueStore {
        let configuration = UbiquitousKeyValueStore.Configuration(
            dataDirectory: global.storeDataDirectory, writeBehindDelay: .milliseconds(100),
            sync: options.syncSettings(global), logger: global.logger)
        do {
            return try UbiquitousKeyValueStore(storeIdentifier: storeIdentifier, configuration: configuration)
        } catch where error.code == .storeLocked {
            throw CommandError(.storeLocked, "store \(storeIdentifier) is open in another process (\(error.reason)); "
                               + "quit that app first, or let it make the change")
        } catch {
            throw CommandError(.general, "cannot open store \(storeIdentifier): \(error)")
        }
    }

    /// "device NAME (ID) in account NAME (ID)", or "signed out".
    var whoAmI: String {
        guard let identity else { return "signed out" }
        return "device \(identity.deviceName) (\(identity.deviceID.short)) in \(identity.account.displayName) (\(identity.account.id.short))"
    }
}

/// Maps a store write error to the command's statuses.
func commandError(_ error: KeyValueStoreError, key: String) -> CommandError {
    switch error.code {
    case .storeLocked: CommandError(.storeLocked, error.description)
    case .persistenceFailed: CommandError(.general, error.description)
    case .initialSyncPending: CommandError(.general, error.description)
    default: CommandError(.invalidValue, error.description)
    }
}
