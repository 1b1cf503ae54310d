import Foundation
import HearthCore

/// What the package's own tools do with a store beyond its public API: the device daemon and
/// the `hearth` command (close, save, wait for peers, stop notifications, report status),
/// HearthTesting and the tests (stand in for peers, read the replica). Reached through
/// `store.internals`; apps never see it.
///
/// A type of its own so that ``UbiquitousKeyValueStore`` is Apple's API and its Swift-native
/// one, and nothing else: these hooks work on the store's backend, as its public methods do,
/// but serve the processes that host stores rather than the apps that use them.
package struct StoreInternals: Sendable {
    /// The store instance (its notifications are this instance's).
    let store: UbiquitousKeyValueStore
    var backend: StoreBackend { store.backend }

    // MARK: Lifecycle

    /// Stops sync and the account watcher, saves, releases the file lock, and forgets the
    /// store on its device, so the next open of the same identifier reads the file afresh.
    /// For tools and test harnesses that reopen the same store in one process (HearthTesting's
    /// restart, the hearth command); apps never need it: a store lives as long as the process.
    ///
    /// After it, this instance keeps its values in memory only; open a new one to go on.
    package func close() async {
        await backend.close()
    }

    /// Saves the store's file now, even if nothing changed since it was opened, and returns
    /// whether it is on disk. A store opened for the first time has no file until its first
    /// change; `hearth serve` and `hearth watch --create` promise to create the store, so
    /// they call this at start. Apps never need it.
    package func saveCreatingFile() async -> Bool {
        await backend.saveEvenIfUnchanged()
    }

    /// ``UbiquitousKeyValueStore/synchronize()`` for async code: the same save and push, with
    /// the save (an fsync) on the store's I/O queue rather than a thread of the cooperative pool.
    @discardableResult
    package func synchronizeOffPool() async -> Bool {
        let saved = await backend.flushOffPool()
        backend.syncEngine?.pushNow()
        return saved
    }

    /// No `didChangeExternallyNotification` is posted for this instance any more: for a process
    /// that observes the store through ``UbiquitousKeyValueStore/changes`` if at all (the device
    /// daemon's held stores, `serve`, `watch`). Once no instance of the store in the process is
    /// posted for and no `changes` sequence runs, a change costs no hop to the notification
    /// queue: the device daemon, whom nobody in its process observes, then only forwards each
    /// change to its apps.
    package func stopPostingNotifications() {
        backend.unregister(store)
    }

    // MARK: Status

    /// Whether this process is attached to another that hosts the store (docs/local-attach.md);
    /// false when it owns the file, or is memory-only.
    package var isAttached: Bool { backend.isAttached }

    /// Whether the first download from the account's peers has happened (its changes were
    /// posted as initialSyncChange; later ones are serverChange). For HearthTesting.
    package var hasCompletedInitialSync: Bool { !backend.awaitingInitialSync }

    /// Why this store does not sync (signed out, paused by the app, or why sync could not
    /// start); nil while it syncs. For the daemon's and `hearth serve`'s first line.
    package var notSyncingReason: NotSyncingReason? { backend.sync.notSyncing }

    /// The device IDs (hex) of the peers connected right now, for `hearth peers`.
    package var connectedPeerDeviceIDs: [String] {
        (backend.syncEngine?.connectedPeers ?? []).map(\.hex).sorted()
    }

    // MARK: Waiting for peers

    /// What announces a change of this store's sync state: the store's own signal (its engine
    /// started or stopped) and its engine's (a peer connected, left, acknowledged or refused).
    /// Asked anew before each wait: the engine changes with sync stopped and resumed.
    package var syncSignals: [ChangeSignal] {
        [backend.syncChanges] + (backend.syncEngine?.changes.map { [$0] } ?? [])
    }

    /// Waits until `condition` (about this store's sync: its confirming peers, refusals,
    /// connected peers...) holds (true) or `deadline` passes (false): checked at once, again at
    /// each of ``syncSignals``, and once more at the deadline (a busy machine may run this task
    /// only after it). No polling. For the `hearth` command's wait for peers, where
    /// ``UbiquitousKeyValueStore/waitUntilSynced(peers:timeout:)`` says too little.
    package func waitForSync(until deadline: ContinuousClock.Instant, _ condition: () -> Bool) async -> Bool {
        await ChangeSignal.waitUntil(deadline, observing: { syncSignals }, condition)
    }

    // MARK: Standing in for peers

    /// Merges entries from elsewhere as one batch and posts `reason` with the keys whose
    /// visible value changed. The sync engine's entry point; tests use it to stand in for peers.
    @discardableResult
    package func applyExternal(_ entries: [Entry], coveredBy vector: VersionVector? = nil,
                               reason: ChangeReason = .serverChange) -> [String] {
        backend.applyExternal(entries, coveredBy: vector, reason: reason).map(\.string)
    }

    /// A copy of the replica behind the store.
    package var replica: Replica { backend.replica }

    /// The replica and the entries it holds back, per origin, read together.
    package var replicaAndHeldBack: (replica: Replica, heldBack: [ReplicaID: Entry]) { backend.replicaAndHeldBack }
}

extension UbiquitousKeyValueStore {
    /// What the package's tools do with this store beyond its public API (``StoreInternals``).
    package var internals: StoreInternals { StoreInternals(store: self) }
}
