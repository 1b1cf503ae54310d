import Foundation
import HearthCore
import HearthIdentity
import HearthSync

/// A `SyncReplica` over a plain ``Replica`` in memory, for driving a ``SyncEngine`` without a
/// store; `observer` hears of calls as they happen, to catch the engine at a given moment;
/// `wall` is its clock (the system's by default), `applied` hears of each delta applied.
final class MemoryReplica: SyncReplica {
    enum Call: Sendable { case winningEntries(count: Int), wallAfterWinners, applyRemote(count: Int) }

    let storeIdentifier: String
    private let state: Locked<(replica: Replica, handler: (@Sendable () -> Void)?, sawWinners: Bool)>
    private let observer: @Sendable (Call) -> Void
    private let wall: @Sendable () -> UInt64
    private let applied: @Sendable () -> Void

    init(storeIdentifier: String, replica: Replica = Replica(), observer: @escaping @Sendable (Call) -> Void = { _ in },
         wall: @escaping @Sendable () -> UInt64 = { HybridLogicalClock.wallMilliseconds() }, applied: @escaping @Sendable () -> Void = {}) {
        self.storeIdentifier = storeIdentifier
        state = Locked((replica, nil, false))
        self.observer = observer
        self.wall = wall
        self.applied = applied
    }

    var replica: Replica { state.withLock { $0.replica } }

    /// A local write, as the store makes it (unsigned; the engine signs it).
    func write(_ value: PropertyListValue?, forKey key: StoreKey) {
        let handler = state.withLock { s in
            s.replica.write(value, forKey: key, wall: wall())
            return s.handler
        }
        handler?()
    }

    func wallMilliseconds() -> UInt64 {
        // The engine reads the clock right after verifying what winningEntries returned.
        if state.withLock({ s in defer { s.sawWinners = false }; return s.sawWinners }) { observer(.wallAfterWinners) }
        return wall()
    }

    var syncVector: VersionVector { state.withLock { $0.replica.vector } }

    func syncDelta(for peer: VersionVector) -> (entries: [Entry], vector: VersionVector) {
        state.withLock { ($0.replica.delta(for: peer), $0.replica.vector) }
    }

    func unsignedEntries() -> [Entry] { state.withLock { $0.replica.entries.values.filter { $0.signature == nil } } }

    func attachSignatures(_ signed: [Entry]) {
        state.withLock { s in
            for entry in signed {
                if let signature = entry.signature { s.replica.attach(signature, forKey: entry.key, origin: entry.origin, sequence: entry.sequence) }
            }
        }
    }

    func winningEntries(_ entries: [Entry]) -> [Entry] {
        let winners = state.withLock { s in
            s.sawWinners = true
            return entries.filter { entry in s.replica.entries[entry.key].map { entry.wins(over: $0) } ?? true }
        }
        observer(.winningEntries(count: entries.count))
        return winners
    }

    func applyRemote(_ entries: [Entry], heldBack: [Entry], reason: ChangeReason) -> (changed: [StoreKey], refused: [RefusedEntry]) {
        observer(.applyRemote(count: entries.count))
        let now = wall()
        let changed = state.withLock { $0.replica.apply(entries, wall: now) }
        applied()
        return (changed, [])
    }

    func entry(forKey key: StoreKey) -> Entry? { state.withLock { $0.replica.entries[key] } }
    func imposedLead(forKey key: StoreKey, origin: ReplicaID, sequence: UInt64) -> Replica.ImposedLead? {
        state.withLock { s in s.replica.imposedLeads[key].flatMap { origin == s.replica.id && $0.sequence == sequence ? $0 : nil } }
    }
    func restampIfNeeded() -> Bool { false }
    var signerCertificates: [Data: Data] { [:] }
    func keepCertificate(_ der: Data, signer: Data) {}
    var knownDevices: [DeviceID] { state.withLock { $0.replica.peerVectors.keys.compactMap(DeviceID.init(hex:)) } }
    func learnOfDevices(_ devices: [DeviceID]) {}
    func notePeer(_ device: DeviceID, acknowledged vector: VersionVector) {
        state.withLock { $0.replica.notePeer(device.hex, acknowledged: vector) }
    }
    func onLocalChange(_ handler: @escaping @Sendable () -> Void) { state.withLock { $0.handler = handler } }
    var awaitingInitialSync: Bool { false }
    func initialSyncCompleted() {}
}
