import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import Logging

/// The store's side of the sync engine: its replica, behind the store's lock. Every rule on
/// what enters it is `SyncedReplica`'s; this adds the store's effects (a save, a notification).
extension StoreBackend: SyncReplica {
    var syncVector: VersionVector { state.withLock { $0.replica.vector } }

    /// What the store's file holds; all of the replica for a store without one.
    var durableVector: VersionVector { state.withLock { $0.storage == nil ? $0.replica.vector : $0.savedVector } }

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
        let (changed, refused, scheduleFlush, forwarded) = state.withLock { s -> ([StoreKey], [RefusedEntry], Bool, [Entry]?) in
            let (changed, refused) = s.replica.applyRemote(entries, heldBack: heldBack, wall: wall)
            // For the attached processes, taken in this step rather than looked up again.
            let forwarded = s.localHost == nil ? nil : changed.compactMap { s.replica.entries[$0] }
            return (changed, refused, scheduleSave(&s), forwarded)
        }
        if scheduleFlush { scheduleWriteBehind() }
        if !changed.isEmpty { post(ChangeEvent(reason: reason, keys: changed.map(\.string)), entries: forwarded) }
        return (changed, refused)
    }

    func dropEntries(signedBy device: Data, stampedAfter removedAt: UInt64) -> Int {
        let (dropped, schedule, host) = state.withLock { s -> ([Entry], Bool, StoreHost?) in
            let dropped = s.replica.dropEntries(signedBy: device, stampedAfter: removedAt)
            guard !dropped.isEmpty else { return ([], false, nil) }
            return (dropped, scheduleSave(&s), s.localHost)
        }
        if schedule { scheduleWriteBehind() }
        let gone = dropped.filter { !$0.isTombstone }.map(\.key.string)
        if !gone.isEmpty { postHere(ChangeEvent(reason: .serverChange, keys: gone)) }
        // An attached copy cannot be sent the absence of an entry: it attaches again, to a snapshot.
        if !dropped.isEmpty { host?.closeClients() }
        return dropped.count
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

    func forgetDevice(_ id: DeviceID) {
        let wall = wallMilliseconds()
        let schedule = state.withLock { s -> Bool in
            guard s.replica.forget(device: id.hex, wall: wall) else { return false }
            return scheduleSave(&s)
        }
        if schedule { scheduleWriteBehind() }
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

    func collectReachedTombstones() {
        let wall = wallMilliseconds()
        let schedule = state.withLock { s -> Bool in
            guard s.replica.collectReachedTombstones(wall: wall) > 0 else { return false }
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

    var wantsWhole: Bool { state.withLock { $0.replica.replica.wantsWhole } }

    func wantWhole() {
        let schedule = state.withLock { s -> Bool in
            guard !s.replica.replica.wantsWhole else { return false }
            s.replica.wantWhole()
            return scheduleSave(&s)
        }
        if schedule { scheduleWriteBehind() }
    }

    func wholeReceived() {
        let schedule = state.withLock { s -> Bool in
            guard s.replica.replica.wantsWhole else { return false }
            s.replica.wholeReceived()
            return scheduleSave(&s)
        }
        if schedule { scheduleWriteBehind() }
    }

}

/// Sync and the account are ``StoreSync``'s; these keep the store's callers (the registry, the
/// public API) as they were.
extension StoreBackend {

    func startSync(identity: DeviceIdentity, settings: SyncSettings) { sync.start(self, identity: identity, settings: settings) }
    func prepareSync(identity: DeviceIdentity, settings: SyncSettings) { sync.prepare(identity: identity, settings: settings) }
    func restartSync() -> Bool { sync.restart(self) }
    func stopSync() async { await sync.stop() }
    func waitForSync() async throws -> Int? { try await sync.waitForStart() }
    var syncEngine: SyncStore? { sync.engine }
    var syncChanges: ChangeSignal { sync.changes }

    func watchAccount(settings: SyncSettings) { sync.watchAccount(settings: settings) }
    func stopWatchingAccount() { sync.stopWatchingAccount() }
}
