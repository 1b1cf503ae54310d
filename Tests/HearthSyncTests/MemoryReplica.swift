import Foundation
import HearthCore
import HearthIdentity
import HearthSync

/// A `SyncReplica` in memory, for driving a ``SyncEngine`` without a store: the product's
/// ``SyncedReplica`` (every admission rule the store applies: quotas, signer shares, held-back
/// entries, origin and device bounds) behind a lock, without the store's file and notifications.
/// `observer` hears of calls as they happen, to catch the engine at a given moment; `wall` is
/// its clock (the system's by default, plus `clockSkewMilliseconds`), `applied` hears of each
/// delta applied.
final class MemoryReplica: SyncReplica {
    enum Call: Sendable { case winningEntries(count: Int), wallAfterWinners, applyRemote(count: Int) }

    let storeIdentifier: String
    private let state: Locked<(synced: SyncedReplica, handler: (@Sendable () -> Void)?, sawWinners: Bool)>
    private let observer: @Sendable (Call) -> Void
    /// Added to `wall`: a device whose clock is wrong.
    private let skew: Int64
    private let wall: @Sendable () -> UInt64
    private let applied: @Sendable () -> Void

    init(storeIdentifier: String, replica: Replica = Replica(), clockSkewMilliseconds: Int64 = 0,
         observer: @escaping @Sendable (Call) -> Void = { _ in },
         wall: @escaping @Sendable () -> UInt64 = { HybridLogicalClock.wallMilliseconds() }, applied: @escaping @Sendable () -> Void = {}) {
        self.storeIdentifier = storeIdentifier
        state = Locked((SyncedReplica(replica), nil, false))
        skew = clockSkewMilliseconds
        self.observer = observer
        self.wall = wall
        self.applied = applied
    }

    var replica: Replica { state.withLock { $0.synced.replica } }

    /// The entries held back, by origin (see `SyncedReplica.heldBack`).
    var heldBack: [ReplicaID: Entry] { state.withLock { $0.synced.heldBack } }

    /// A local write, as the store makes it: the same rules, then unsigned (the engine signs it).
    func write(_ value: PropertyListValue?, forKey key: StoreKey) throws(SyncedReplica.LocalRefusal) {
        let size: Int
        do throws(EntryRuleViolation) {
            size = try StoreLimits.check(key: key, value: value)
        } catch {
            throw .entry(error)
        }
        let wall = now()
        let handler = try state.withLock { (s) throws(SyncedReplica.LocalRefusal) -> (@Sendable () -> Void)? in
            let (entry, restamped) = try s.synced.write(value, forKey: key, size: size, wall: wall, strict: false)
            return entry != nil || !restamped.isEmpty ? s.handler : nil
        }
        handler?()
    }

    func wallMilliseconds() -> UInt64 {
        // The engine reads the clock right after verifying what winningEntries returned.
        if state.withLock({ s in defer { s.sawWinners = false }; return s.sawWinners }) { observer(.wallAfterWinners) }
        return now()
    }

    /// The clock for this replica's own use, which the observer does not hear of.
    private func now() -> UInt64 {
        UInt64(clamping: Int64(clamping: wall()) &+ skew)
    }

    var syncVector: VersionVector { state.withLock { $0.synced.vector } }

    func syncDelta(for peer: VersionVector) -> (entries: [Entry], vector: VersionVector) {
        state.withLock { ($0.synced.delta(for: peer), $0.synced.vector) }
    }

    func unsignedEntries() -> [Entry] { state.withLock { $0.synced.unsignedEntries() } }

    func attachSignatures(_ signed: [Entry]) { state.withLock { $0.synced.attachSignatures(signed) } }

    func winningEntries(_ entries: [Entry]) -> [Entry] {
        let winners = state.withLock { s in
            s.sawWinners = true
            return s.synced.winningEntries(entries)
        }
        observer(.winningEntries(count: entries.count))
        return winners
    }

    func applyRemote(_ entries: [Entry], heldBack: [Entry], reason: ChangeReason) -> (changed: [StoreKey], refused: [RefusedEntry]) {
        observer(.applyRemote(count: entries.count))
        let wall = now()
        let result = state.withLock { $0.synced.applyRemote(entries, heldBack: heldBack, wall: wall) }
        applied()
        return result
    }

    func entry(forKey key: StoreKey) -> Entry? { state.withLock { $0.synced.entries[key] } }

    func dropEntries(signedBy device: Data, stampedAfter removedAt: UInt64) -> Int {
        state.withLock { $0.synced.dropEntries(signedBy: device, stampedAfter: removedAt).count }
    }

    func imposedLead(forKey key: StoreKey, origin: ReplicaID, sequence: UInt64) -> Replica.ImposedLead? {
        state.withLock { $0.synced.imposedLead(forKey: key, origin: origin, sequence: sequence) }
    }

    func restampIfNeeded() -> Bool {
        let wall = now()
        let handler = state.withLock { s in s.synced.restampFutureEntries(wall: wall).isEmpty ? nil : s.handler }
        handler?()
        return handler != nil
    }

    var signerCertificates: [Data: Data] { state.withLock { $0.synced.certificates } }
    func keepCertificate(_ der: Data, signer: Data) { state.withLock { $0.synced.keepCertificate(der, signer: signer) } }

    var knownDevices: [DeviceID] { state.withLock { $0.synced.peerVectors.keys.compactMap(DeviceID.init(hex:)) } }
    func learnOfDevices(_ devices: [DeviceID]) { _ = state.withLock { $0.synced.learnOf(devices: devices.map(\.hex)) } }
    func forgetDevice(_ device: DeviceID) {
        let wall = now()
        _ = state.withLock { $0.synced.forget(device: device.hex, wall: wall) }
    }
    func notePeer(_ device: DeviceID, acknowledged vector: VersionVector) {
        let wall = now()
        _ = state.withLock { $0.synced.notePeer(device.hex, acknowledged: vector, wall: wall) }
    }

    func collectReachedTombstones() {
        let wall = now()
        _ = state.withLock { $0.synced.collectReachedTombstones(wall: wall) }
    }

    func onLocalChange(_ handler: @escaping @Sendable () -> Void) { state.withLock { $0.handler = handler } }
    var awaitingInitialSync: Bool { state.withLock { !$0.synced.hasSynced } }
    func initialSyncCompleted() { state.withLock { $0.synced.initialSyncCompleted() } }
    var wantsWhole: Bool { state.withLock { $0.synced.replica.wantsWhole } }
    func wholeReceived() { state.withLock { $0.synced.wholeReceived() } }
    func wantWhole() { state.withLock { $0.synced.wantWhole() } }
}
