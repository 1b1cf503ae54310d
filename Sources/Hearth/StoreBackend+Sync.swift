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

/// The store's side of the sync engine: its replica, behind the store's lock.
extension StoreBackend: SyncReplica {
    /// How long a tombstone is kept when some known peer never acknowledges it (30 days).
    static let tombstoneHorizon: UInt64 = 30 * 86_400_000

    var syncVector: VersionVector { state.withLock { $0.replica.vector } }

    func syncDelta(for peer: VersionVector) -> (entries: [Entry], vector: VersionVector) {
        state.withLock { ($0.replica.delta(for: peer), $0.replica.vector) }
    }

    func unsignedEntries() -> [Entry] {
        state.withLock { s in
            guard !s.unsignedKeys.isEmpty else { return [] }
            let unsigned = s.unsignedKeys.compactMap { s.replica.entries[$0] }.filter { $0.signature == nil }
            s.unsignedKeys = Set(unsigned.map(\.key))
            return unsigned
        }
    }

    func attachSignatures(_ signed: [Entry]) {
        let schedule = state.withLock { s -> Bool in
            for entry in signed {
                if let signature = entry.signature,
                   s.replica.attach(signature, forKey: entry.key, origin: entry.origin, sequence: entry.sequence) {
                    s.unsignedKeys.remove(entry.key)
                }
            }
            return scheduleSave(&s)
        }
        if schedule { scheduleWriteBehind() }
    }

    func winningEntries(_ entries: [Entry]) -> [Entry] {
        state.withLock { s in
            entries.filter { entry in s.replica.entries[entry.key].map { entry.wins(over: $0) } ?? true }
        }
    }

    func applyRemote(_ entries: [Entry], heldBack: [Entry], reason: ChangeReason) -> (changed: [StoreKey], refused: [RefusedEntry]) {
        let wall = wallMilliseconds()
        let (changed, refused, scheduleFlush) = state.withLock { s -> ([StoreKey], [RefusedEntry], Bool) in
            let (accepted, overQuota, newOrigin) = Self.withinSignerShares(entries, of: s.replica)
            // Held back only if not received already (then there is nothing to ask for again), and
            // kept without its value: what a hold needs is the entry's key, origin, sequence and time.
            for entry in heldBack + overQuota where !s.replica.vector.covers(entry) {
                if let held = s.heldBack[entry.origin], held.sequence <= entry.sequence { continue }
                guard s.heldBack[entry.origin] != nil || s.heldBack.count < Self.maximumHeldOrigins else { continue }
                var held = entry
                held.value = nil
                s.heldBack[entry.origin] = held
            }
            let changed = s.replica.apply(accepted, coveredBy: nil, wall: wall)
            if !s.heldBack.isEmpty {
                // A hold ends when the entry arrives or this replica has a later write of its key.
                s.heldBack = s.heldBack.filter { _, held in
                    guard let current = s.replica.entries[held.key] else { return true }
                    return !(current.origin == held.origin && current.sequence == held.sequence) && !current.wins(over: held)
                }
                for held in s.heldBack.values { s.replica.uncover(held) }
            }
            // Entries of one origin too many are not held back (a hold would take a slot of the
            // 1,024 from honest holds); they are not covered either, so they come again on a new link.
            let refused = overQuota.map { entry in
                RefusedEntry(entry, reason: .signerQuota, detail: "the entries its signer wrote would take more of this store than one device may "
                             + "(\(StoreLimits.maximumSignerBytes) bytes, \(StoreLimits.maximumSignerKeys) keys, \(StoreLimits.maximumSignerTombstones) deletes)")
            } + newOrigin.map { entry in
                RefusedEntry(entry, reason: .signerQuota, detail: "its signer has \(Replica.maximumOriginsPerDevice) origins (runs) with entries in this store "
                             + "already, as many as one device may")
            }
            return (changed, refused, scheduleSave(&s))
        }
        if scheduleFlush { scheduleWriteBehind() }
        if !changed.isEmpty { post(ChangeEvent(reason: reason, keys: changed.map(\.string))) }
        return (changed, refused)
    }

    /// Splits `entries` (in order) into those that keep every signer within its share of the
    /// store (`StoreLimits.maximumSigner…`), those that would take it beyond, and those that
    /// would give another device more than `Replica.maximumOriginsPerDevice` origins owning
    /// entries. An entry that shrinks its signer's share, or replaces nothing, is always within.
    static func withinSignerShares(_ entries: [Entry], of replica: Replica) -> (accepted: [Entry], overQuota: [Entry], newOrigin: [Entry]) {
        var shares: [Data: Replica.SignerUsage] = [:]
        var current: [StoreKey: Entry] = [:]
        // Origins this delta brings, by device: one device may have at most
        // Replica.maximumOriginsPerDevice owning entries (this device's own are never bounded).
        var newOrigins: [UInt64: Set<ReplicaID>] = [:]
        func bringsOneOriginTooMany(_ entry: Entry) -> Bool {
            let device = entry.origin.devicePrefix
            guard device != replica.id.devicePrefix, replica.originEntries[entry.origin] == nil,
                  newOrigins[device]?.contains(entry.origin) != true else { return false }
            return (replica.deviceOrigins[device] ?? 0) + (newOrigins[device]?.count ?? 0) >= Replica.maximumOriginsPerDevice
        }
        var accepted: [Entry] = [], overQuota: [Entry] = [], newOrigin: [Entry] = []
        accepted.reserveCapacity(entries.count)
        func add(_ entry: Entry, _ sign: Int) {
            guard let signer = entry.signature?.signer else { return }
            var share = shares[signer] ?? replica.signerUsage[signer] ?? Replica.SignerUsage()
            if entry.isTombstone { share.tombstones += sign } else { share.bytes += sign * entry.quotaSize; share.keys += sign }
            shares[signer] = share
        }
        for entry in entries {
            let previous = current[entry.key] ?? replica.entries[entry.key]
            if let previous, !entry.wins(over: previous) {
                accepted.append(entry)      // loses: changes nothing
                continue
            }
            if bringsOneOriginTooMany(entry) {
                newOrigin.append(entry)
                continue
            }
            let before = entry.signature.map { shares[$0.signer] ?? replica.signerUsage[$0.signer] ?? Replica.SignerUsage() }
            if let previous { add(previous, -1) }
            add(entry, +1)
            if let signer = entry.signature?.signer, let before, let after = shares[signer],
               (after.bytes > StoreLimits.maximumSignerBytes && after.bytes > before.bytes)
                || (after.keys > StoreLimits.maximumSignerKeys && after.keys > before.keys)
                || (after.tombstones > StoreLimits.maximumSignerTombstones && after.tombstones > before.tombstones) {
                add(entry, -1)
                if let previous { add(previous, +1) }
                overQuota.append(entry)
                continue
            }
            current[entry.key] = entry
            if replica.originEntries[entry.origin] == nil { newOrigins[entry.origin.devicePrefix, default: []].insert(entry.origin) }
            accepted.append(entry)
        }
        return (accepted, overQuota, newOrigin)
    }

    func entry(forKey key: StoreKey) -> Entry? {
        state.withLock { $0.replica.entries[key] }
    }

    func imposedLead(forKey key: StoreKey, origin: ReplicaID, sequence: UInt64) -> Replica.ImposedLead? {
        state.withLock { s in
            guard origin == s.replica.id, let lead = s.replica.imposedLeads[key], lead.sequence == sequence else { return nil }
            return lead
        }
    }

    var signerCertificates: [Data: Data] { state.withLock { $0.replica.certificates } }

    func keepCertificate(_ der: Data, signer: Data) {
        // Not worth a save of its own: it goes to disk with the entries it vouches for.
        state.withLock { $0.replica.keepCertificate(der, signer: signer) }
    }

    // The replica's file keys devices by hex ID: the conversion happens here, at its edge.
    var knownDevices: [DeviceID] { state.withLock { $0.replica.peerVectors.keys.compactMap(DeviceID.init(hex:)) } }

    /// At most this many origins have an entry held back: past them, a refused entry is simply
    /// covered by later ones (a peer making up origins cannot grow the list).
    static let maximumHeldOrigins = 1024

    /// A household is a few devices; past this many known, devices heard of are not added
    /// (a misbehaving peer could otherwise grow the list, and the file, without bound).
    static let maximumKnownDevices = 256

    func learnOfDevices(_ devices: [DeviceID]) {
        guard !devices.isEmpty else { return }
        let ignored = state.withLock { s -> Int in
            var ignored = 0
            for device in devices.map(\.hex) where s.replica.peerVectors[device] == nil {
                guard s.replica.peerVectors.count < Self.maximumKnownDevices else { ignored += 1; continue }
                s.replica.learnOf(device: device)
            }
            return ignored
        }
        if ignored > 0 {
            logger.warning("ignoring \(ignored) more devices a peer says it knows of: \(Self.maximumKnownDevices) are known already",
                           metadata: ["store": "\(storeIdentifier)"])
        }
    }

    func notePeer(_ id: DeviceID, acknowledged vector: VersionVector) {
        let device = id.hex
        let horizon = wallMilliseconds() &- Self.tombstoneHorizon
        let schedule = state.withLock { s -> Bool in
            let before = s.replica.peerVectors[device]
            s.replica.notePeer(device, acknowledged: vector)
            let collected = s.replica.collectTombstones(coveredBy: s.replica.stableVector,
                                                        olderThan: HLCTimestamp(milliseconds: horizon, counter: 0))
            // What a peer is known to have is saved too (hearth status reads it), but only when
            // it changed: an idle link's pings repeat the same vector and must not touch the disk.
            guard collected > 0 || s.replica.peerVectors[device] != before else { return false }
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
        state.withLock { $0.replica.hasSynced = true }
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
