import Foundation
import HearthCore
import HearthIdentity

/// The replica as the sessions of one engine see it: a pass-through that ``close()`` shuts.
///
/// Stopping an engine must be a barrier: once ``SyncEngine/stop()`` returns, none of its
/// sessions may change the replica, whose store may meanwhile have switched to another
/// account's data (a delta verified for account X must never land in account Y's replica).
/// Every call that changes the replica runs under the gate's lock and only while it is open;
/// `close()` takes the same lock, so it waits for a change in progress and no change starts
/// after it. Changes are short (the store's own lock, no I/O), so the wait is too.
final class ReplicaGate: SyncReplica {
    private let replica: any SyncReplica
    private let open = Locked(true)

    init(_ replica: any SyncReplica) {
        self.replica = replica
    }

    /// Shuts the gate; returns once no change is in progress.
    func close() {
        open.withLock { $0 = false }
    }

    var isOpen: Bool { open.withLock { $0 } }

    /// Runs `change` if the gate is open, holding it open meanwhile; `closed` otherwise.
    private func ifOpen<T>(_ closed: T, _ change: () -> T) -> T {
        open.withLock { isOpen in isOpen ? change() : closed }
    }

    // Reads pass through: they change nothing.
    var storeIdentifier: String { replica.storeIdentifier }
    func wallMilliseconds() -> UInt64 { replica.wallMilliseconds() }
    var syncVector: VersionVector { replica.syncVector }
    var durableVector: VersionVector { replica.durableVector }
    func syncDelta(for peer: VersionVector) -> (entries: [Entry], vector: VersionVector) { replica.syncDelta(for: peer) }
    func winningEntries(_ entries: [Entry]) -> [Entry] { replica.winningEntries(entries) }
    func entry(forKey key: StoreKey) -> Entry? { replica.entry(forKey: key) }
    func imposedLead(forKey key: StoreKey, origin: ReplicaID, sequence: UInt64) -> Replica.ImposedLead? {
        replica.imposedLead(forKey: key, origin: origin, sequence: sequence)
    }
    var signerCertificates: [Data: Data] { replica.signerCertificates }
    var knownDevices: [DeviceID] { replica.knownDevices }
    var awaitingInitialSync: Bool { replica.awaitingInitialSync }
    var wantsWhole: Bool { replica.wantsWhole }

    // Changes go through the gate.
    func unsignedEntries() -> [Entry] { ifOpen([]) { replica.unsignedEntries() } }
    func attachSignatures(_ signed: [Entry]) { ifOpen(()) { replica.attachSignatures(signed) } }
    func applyRemote(_ entries: [Entry], heldBack: [Entry], reason: ChangeReason) -> (changed: [StoreKey], refused: [RefusedEntry]) {
        ifOpen(([], [])) { replica.applyRemote(entries, heldBack: heldBack, reason: reason) }
    }
    func restampIfNeeded() -> Bool { ifOpen(false) { replica.restampIfNeeded() } }
    func dropEntries(signedBy device: Data, stampedAfter removedAt: UInt64) -> Int {
        ifOpen(0) { replica.dropEntries(signedBy: device, stampedAfter: removedAt) }
    }
    func keepCertificate(_ der: Data, signer: Data) { ifOpen(()) { replica.keepCertificate(der, signer: signer) } }
    func learnOfDevices(_ devices: [DeviceID]) { ifOpen(()) { replica.learnOfDevices(devices) } }
    func forgetDevice(_ device: DeviceID) { ifOpen(()) { replica.forgetDevice(device) } }
    func notePeer(_ device: DeviceID, acknowledged vector: VersionVector) { ifOpen(()) { replica.notePeer(device, acknowledged: vector) } }
    func collectReachedTombstones() { ifOpen(()) { replica.collectReachedTombstones() } }
    func onLocalChange(_ handler: @escaping @Sendable () -> Void) { ifOpen(()) { replica.onLocalChange(handler) } }
    func initialSyncCompleted() { ifOpen(()) { replica.initialSyncCompleted() } }
    func wholeReceived() { ifOpen(()) { replica.wholeReceived() } }
    func wantWhole() { ifOpen(()) { replica.wantWhole() } }
}
