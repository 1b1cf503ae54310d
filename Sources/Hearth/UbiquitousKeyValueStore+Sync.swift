import Foundation
import HearthCore
import HearthSync

/// A peer device refused a write of this device (``UbiquitousKeyValueStore/syncRefusals``).
public typealias SyncRefusal = HearthSync.SyncRefusal
/// What this device's sync has sent and received (``UbiquitousKeyValueStore/syncMetrics``).
public typealias SyncCounters = HearthSync.SyncCounters
/// An entry a peer refused, and why (`SyncRefusal.entry`).
public typealias RefusedEntry = HearthCore.RefusedEntry
/// The run of a store that wrote an entry: 16 random bytes, new each time a store opens.
public typealias ReplicaID = HearthCore.ReplicaID

// Sync status and control, beyond Apple's API (where iCloud hides all of this).

extension UbiquitousKeyValueStore {
    /// The account this store's data belongs to (hex account ID), or `nil` when signed out.
    public var accountID: String? {
        backend.location?.account
    }

    /// Whether a sync engine runs for this store (the user is signed in and sync is enabled).
    public var isSyncing: Bool { backend.syncEngine != nil }

    /// Waits until the sync listener is up and returns its TCP port; `nil` if not syncing.
    public func syncPort() async throws -> Int? {
        try await backend.waitForSync()
    }

    /// Connects to a peer by address and keeps the connection up, in addition to discovery.
    public func addSyncPeer(host: String, port: Int) {
        backend.syncEngine?.addPeer(host: host, port: port)
    }

    /// The peers discovery reports right now (connected or not), as `name (address:port)`.
    public var discoveredPeers: [String] {
        (backend.syncEngine?.discoveredPeers ?? []).map { peer in
            "\(peer.name) (\(peer.addresses.first.map(\.description) ?? "?"):\(peer.port))"
        }
    }

    /// How many connected peer devices have confirmed having every change of this store (or
    /// refused one, see ``syncRefusals``): what a command-line tool reports before exiting.
    public var confirmingPeerCount: Int { backend.syncEngine?.settledPeers.count ?? 0 }

    /// The number of peer devices connected right now.
    public var connectedPeerCount: Int { backend.syncEngine?.connectedPeers.count ?? 0 }

    /// Waits until at least `peers` devices are connected and each has confirmed having every
    /// change of this store; returns `false` if that does not happen within `timeout` (or the
    /// store is not syncing). A command-line tool calls it before exiting.
    ///
    /// ```swift
    /// store.set("milk", forKey: "item-1")
    /// let delivered = await store.waitUntilSynced(peers: 1, timeout: .seconds(5))
    /// ```
    public func waitUntilSynced(peers: Int = 1, timeout: Duration) async -> Bool {
        let backend = self.backend
        return await internals.waitForSync(until: ContinuousClock.now + timeout) {
            guard let engine = backend.syncEngine else { return false }
            return engine.connectedPeers.count >= peers && engine.isSettled
        }
    }

    /// What peer devices refused of this device's writes, each with why, for as long as the
    /// refused write is the key's current value here.
    ///
    /// A refused entry does not hold up the rest: every other change still syncs, and
    /// ``waitUntilSynced(peers:timeout:)`` counts a refused entry as delivered (the peer has
    /// answered for it). The usual cause is this device's clock being hours ahead
    /// (`RefusedEntry.Reason.clockAhead`); once the clock is right, such writes are written
    /// again with the current time and sync.
    ///
    /// ```swift
    /// store.set(2, forKey: "backgroundColor")
    /// _ = await store.waitUntilSynced(timeout: .seconds(5))
    /// for refusal in store.syncRefusals where refusal.entry.key == "backgroundColor" { print(refusal) }
    /// ```
    public var syncRefusals: [SyncRefusal] { backend.syncEngine?.refusals ?? [] }

    /// What this device's sync engine has sent and received since it started (shared by the
    /// stores that sync as this device); nil while the store does not sync.
    ///
    /// ```swift
    /// if let counters = store.syncMetrics { print("\(counters.entriesSent) entries sent") }
    /// ```
    public var syncMetrics: SyncCounters? { backend.syncEngine?.metrics.snapshot }

    /// Starts syncing again after ``stopSync()``, as it was started when the store opened.
    @discardableResult
    public func resumeSync() -> Bool {
        backend.restartSync()
    }

    /// Stops syncing (closes every connection and the listener). The store keeps working locally.
    public func stopSync() async {
        await backend.stopSync()
    }
}
