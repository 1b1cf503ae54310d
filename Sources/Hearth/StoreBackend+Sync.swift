import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import Logging

/// What a sync engine is started with.
struct SyncParameters: Sendable {
    let identity: DeviceIdentity
    let settings: SyncSettings
}

/// This store on a running sync engine (shared with the process's other stores of the same
/// identity and settings) and what it needs to be stopped.
struct SyncRun: Sendable {
    let lease: SyncEngineRegistry.Lease
    let store: SyncStore
}

/// The store's side of the sync engine: its replica, behind the store's lock. Every rule on
/// what enters it is `SyncedReplica`'s; this adds the store's effects (a save, a notification).
extension StoreBackend: SyncReplica {
    var syncVector: VersionVector { state.withLock { $0.replica.vector } }

    func syncDelta(for peer: VersionVector) -> (entries: [Entry], vector: VersionVector) {
        state.withLock { ($0.replica.delta(for: peer), $0.replica.vector) }
    }

    func unsignedEntries() -> [Entry] {
        state.withLock { $0.replica.unsignedEntries() }
    }

    func attachSignatures(_ signed: [Entry]) {
        let schedule = state.withLock { s -> Bool in
            s.replica.attachSignatures(signed)
            return scheduleSave(&s)
        }
        if schedule { scheduleWriteBehind() }
    }

    func winningEntries(_ entries: [Entry]) -> [Entry] {
        state.withLock { $0.replica.winningEntries(entries) }
    }

    func applyRemote(_ entries: [Entry], heldBack: [Entry], reason: ChangeReason) -> (changed: [StoreKey], refused: [RefusedEntry]) {
        let wall = wallMilliseconds()
        let (changed, refused, scheduleFlush) = state.withLock { s -> ([StoreKey], [RefusedEntry], Bool) in
            let (changed, refused) = s.replica.applyRemote(entries, heldBack: heldBack, wall: wall)
            return (changed, refused, scheduleSave(&s))
        }
        if scheduleFlush { scheduleWriteBehind() }
        if !changed.isEmpty { post(ChangeEvent(reason: reason, keys: changed.map(\.string))) }
        return (changed, refused)
    }

    func entry(forKey key: StoreKey) -> Entry? {
        state.withLock { $0.replica.entries[key] }
    }

    func imposedLead(forKey key: StoreKey, origin: ReplicaID, sequence: UInt64) -> Replica.ImposedLead? {
        state.withLock { $0.replica.imposedLead(forKey: key, origin: origin, sequence: sequence) }
    }

    var signerCertificates: [Data: Data] { state.withLock { $0.replica.certificates } }

    func keepCertificate(_ der: Data, signer: Data) {
        // Not worth a save of its own: it goes to disk with the entries it vouches for.
        state.withLock { $0.replica.keepCertificate(der, signer: signer) }
    }

    // The replica's file keys devices by hex ID: the conversion happens here, at its edge.
    var knownDevices: [DeviceID] { state.withLock { $0.replica.peerVectors.keys.compactMap(DeviceID.init(hex:)) } }

    func learnOfDevices(_ devices: [DeviceID]) {
        guard !devices.isEmpty else { return }
        let ignored = state.withLock { $0.replica.learnOf(devices: devices.map(\.hex)) }
        if ignored > 0 {
            logger.warning("ignoring \(ignored) more devices a peer says it knows of: \(SyncedReplica.maximumKnownDevices) are known already",
                           metadata: ["store": "\(storeIdentifier)"])
        }
    }

    func notePeer(_ id: DeviceID, acknowledged vector: VersionVector) {
        let wall = wallMilliseconds()
        let schedule = state.withLock { s -> Bool in
            // What a peer is known to have is saved too (hearth status reads it), but only when it changed.
            guard s.replica.notePeer(id.hex, acknowledged: vector, wall: wall) else { return false }
            return scheduleSave(&s)
        }
        if schedule { scheduleWriteBehind() }
    }

    func onLocalChange(_ handler: @escaping @Sendable () -> Void) {
        // One engine runs at a time: a restarted one replaces the stopped one's handler.
        state.withLock { $0.localChangeHandler = handler }
    }

    var awaitingInitialSync: Bool { state.withLock { !$0.replica.hasSynced } }

    func initialSyncCompleted() {
        state.withLock { $0.replica.initialSyncCompleted() }
    }

    // MARK: Starting and stopping

    /// Starts syncing this replica as `identity`, on the process's engine for that identity
    /// and `settings` (started if this is its first store); does nothing if this store syncs
    /// already.
    func startSync(identity: DeviceIdentity, settings: SyncSettings) {
        let registry = SyncEngineRegistry.shared
        let lease: SyncEngineRegistry.Lease
        let store: SyncStore
        do {
            lease = try registry.acquire(identity: identity, settings: settings, logger: logger)
        } catch {
            logger.error("cannot start sync: \(error)", metadata: ["store": "\(storeIdentifier)"])
            return
        }
        do {
            store = try lease.engine.attach(self)
        } catch {
            // Attached already: a store of this identifier in another data directory syncs as
            // this device already (or a concurrent start of this one won).
            logger.warning("cannot start sync: \(error)", metadata: ["store": "\(storeIdentifier)"])
            Task { await registry.release(lease) }
            return
        }
        // Checked and recorded in one step, so two concurrent starts cannot both sync it.
        let kept = state.withLock { s -> Bool in
            guard s.sync == nil else { return false }
            s.refuseWritesBeforeInitialSync = settings.discardWritesBeforeInitialSync
            s.sync = SyncRun(lease: lease, store: store)
            s.syncParameters = SyncParameters(identity: identity, settings: settings)
            return true
        }
        if !kept {
            lease.engine.detach(storeIdentifier: storeIdentifier)
            Task { await registry.release(lease) }
        } else {
            syncChanges.signal()
        }
    }

    /// Records how to sync without starting: ``restartSync()`` starts it (for
    /// ``UbiquitousKeyValueStore/Configuration/syncStartsPaused``).
    func prepareSync(identity: DeviceIdentity, settings: SyncSettings) {
        state.withLock { s in
            if s.syncParameters == nil { s.syncParameters = SyncParameters(identity: identity, settings: settings) }
        }
    }

    /// Starts sync again with the parameters of the last start (or of ``prepareSync(identity:settings:)``);
    /// false if there are none, or it runs already.
    func restartSync() -> Bool {
        guard let parameters = state.withLock({ $0.sync == nil ? $0.syncParameters : nil }) else { return false }
        startSync(identity: parameters.identity, settings: parameters.settings)
        return true
    }

    /// This store on its sync engine, while it syncs.
    var syncEngine: SyncStore? { state.withLock { $0.sync?.store } }

    func waitForSync() async throws -> Int? {
        guard let run = state.withLock({ $0.sync }) else { return nil }
        return try await run.lease.started.value
    }

    /// Stops syncing this store: a barrier (once it returns no session changes the replica);
    /// the engine stops with the last of its stores.
    func stopSync() async {
        guard let run = state.withLock({ s -> SyncRun? in defer { s.sync = nil }; return s.sync }) else { return }
        syncChanges.signal()
        run.lease.engine.detach(storeIdentifier: storeIdentifier)
        await SyncEngineRegistry.shared.release(run.lease)
    }
}
