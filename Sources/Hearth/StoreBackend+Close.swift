import Foundation
import HearthCore

// Closing a store completely, for tools and test harnesses that reopen the same store in one
// process (HearthTesting's restart, the hearth command). Apps never need it: a store lives
// as long as the process.

extension UbiquitousKeyValueStore {
    /// Stops sync and the account watcher, saves, releases the file lock, and forgets the
    /// store on its device, so the next open of the same identifier reads the file afresh.
    ///
    /// After it, this instance keeps its values in memory only; open a new one to go on.
    package func close() async {
        await backend.close()
    }
}

extension StoreBackend {
    /// See ``UbiquitousKeyValueStore/close()``.
    func close() async {
        // Attached: the host gets what is pending, then the connection closes for good.
        _ = try? await onIOQueue { [self] in detach(synchronize: true) }
        // Hosting: attached processes take over once the lock is released below.
        stopHosting()
        stopWatchingAccount()
        await stopSync()
        await flushOffPool()
        // The sync engine may hold this backend a little longer; dropping the storage here
        // releases the flock now rather than when the last reference goes.
        let storage = state.withLock { s -> ReplicaStorage? in
            defer { s.storage = nil }
            return s.storage
        }
        _ = storage
        sync.owner?.stores.forget(self)
    }
}

extension UbiquitousKeyValueStore {
    /// The device IDs (hex) of the peers connected right now, for `hearth peers`.
    package var connectedPeerDeviceIDs: [String] {
        (backend.syncEngine?.connectedPeers ?? []).map(\.hex).sorted()
    }
}

extension UbiquitousKeyValueStore {
    /// Whether the first download from the account's peers has happened (its changes were
    /// posted as initialSyncChange; later ones are serverChange). For HearthTesting.
    package var hasCompletedInitialSync: Bool { !backend.awaitingInitialSync }
}

extension UbiquitousKeyValueStore {
    /// Whether this process is attached to another that hosts the store (docs/local-attach.md);
    /// false when it owns the file, or is memory-only.
    package var isAttached: Bool { backend.isAttached }
}
