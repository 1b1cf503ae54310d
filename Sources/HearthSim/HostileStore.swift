import Foundation
import HearthCore
import HearthIdentity
import HearthSync

/// A store of the hostile member (`--hostile`, docs/simulator.md): a device of the household,
/// with its valid keys, running the production engine over a store that lies. The engine
/// speaks the real protocol and signs what this store hands it; what it says comes from here:
///
/// - **lying vectors**: its vector (in hellos, `store` messages, acks, pings, deltas) claims
///   every origin a million entries ahead of what it has, or nothing at all;
/// - **replays**: its deltas carry, besides what the peer lacks, old entries it was sent long
///   ago (valid signatures, long superseded or removed), whatever the peer's vector;
/// - **withholding**: its deltas leave out entries of other devices while carrying their later
///   ones (a relay with gaps);
/// - **floods**: hundreds of origins of its own at once, or a thousand keys with 600-byte values.
///
/// It takes in what peers send honestly (the product's ``SyncedReplica``), so it has entries
/// to replay and to relay.
final class HostileStore: SyncReplica {
    /// What the store does now (drawn by the household, ``Household/hostileAct()``).
    enum Act: String, CaseIterable, Sendable {
        case honest
        case claimsEverything = "claims everything"
        case claimsNothing = "claims nothing"
        case replays
        case withholds
    }

    private struct State {
        var synced: SyncedReplica
        var act = Act.honest
        /// Entries peers sent, oldest first (at most ``remembered``): what it replays.
        var seen: [Entry] = []
        /// Its flood entries, by key (signed once the engine signs them).
        var flood: [StoreKey: Entry] = [:]
        var floods = 0
        var handler: (@Sendable () -> Void)?
        var random: SplitMix64
    }

    let storeIdentifier: String
    private let state: Locked<State>
    private let wall: @Sendable () -> UInt64
    /// Its device's origin prefix: the origins it may sign for.
    private let prefix: UInt64
    static let remembered = 4096

    init(storeIdentifier: String, replica: Replica, prefix: UInt64, wall: @escaping @Sendable () -> UInt64, seed: UInt64) {
        self.storeIdentifier = storeIdentifier
        self.wall = wall
        self.prefix = prefix
        state = Locked(State(synced: SyncedReplica(replica), random: SplitMix64(seed: seed)))
    }

    func act(_ act: Act) { state.withLock { $0.act = act } }

    /// Makes `count` entries at once, signed by the engine when it next sends: each of a new
    /// origin (`newOrigins`), or all of one new origin with `valueBytes`-byte values. Keys
    /// `h<flood>-<i>`, stamped now. Returns how many.
    @discardableResult
    func flood(_ count: Int, newOrigins: Bool, valueBytes: Int) -> Int {
        let now = wall()
        let handler = state.withLock { s -> (@Sendable () -> Void)? in
            s.floods += 1
            var origin = ReplicaID(high: prefix, low: s.random.next())
            for i in 0..<count {
                if newOrigins && i > 0 { origin = ReplicaID(high: prefix, low: s.random.next()) }
                let key = StoreKey("h\(s.floods)-\(i)")
                let value = PropertyListValue.string(String(repeating: "x", count: max(1, valueBytes)))
                s.flood[key] = Entry(key: key, value: value, timestamp: HLCTimestamp(milliseconds: now, counter: UInt16(i % 60_000)),
                                     origin: origin, sequence: newOrigins ? 1 : UInt64(i + 1))
            }
            return s.handler
        }
        handler?()
        return count
    }

    /// How many entries it holds (its own replica and its floods).
    var size: Int { state.withLock { $0.synced.entries.count + $0.flood.count } }

    // MARK: SyncReplica

    func wallMilliseconds() -> UInt64 { wall() }

    var syncVector: VersionVector {
        state.withLock { s in
            switch s.act {
            case .claimsEverything:
                var vector = VersionVector()
                for (origin, counter) in s.synced.vector.counters { vector.advance(origin: origin, to: counter + 1_000_000) }
                return vector
            case .claimsNothing: return VersionVector()
            case .honest, .replays, .withholds: return s.synced.vector
            }
        }
    }

    func syncDelta(for peer: VersionVector) -> (entries: [Entry], vector: VersionVector) {
        let vector = syncVector
        return state.withLock { s in
            var entries = s.synced.delta(for: peer) + s.flood.values.filter { !peer.covers($0) }.sorted { ($0.origin, $0.sequence) < ($1.origin, $1.sequence) }
            switch s.act {
            case .replays where !s.seen.isEmpty:
                for _ in 0..<min(64, s.seen.count) { entries.append(s.seen[Int(s.random.next() % UInt64(s.seen.count))]) }
            case .withholds:
                // Every other entry of another device, the later ones kept: the peer's vector
                // advances over the ones left out.
                var drop = false
                entries = entries.filter { entry in
                    guard entry.origin.devicePrefix != prefix else { return true }
                    drop.toggle()
                    return !drop
                }
            default: break
            }
            return (entries, vector)
        }
    }

    func unsignedEntries() -> [Entry] {
        state.withLock { $0.synced.unsignedEntries() + $0.flood.values.filter { $0.signature == nil } }
    }

    func attachSignatures(_ signed: [Entry]) {
        state.withLock { s in
            var own: [Entry] = []
            for entry in signed {
                if let flooded = s.flood[entry.key], flooded.origin == entry.origin, flooded.sequence == entry.sequence {
                    s.flood[entry.key] = entry
                } else {
                    own.append(entry)
                }
            }
            s.synced.attachSignatures(own)
        }
    }

    func winningEntries(_ entries: [Entry]) -> [Entry] { state.withLock { $0.synced.winningEntries(entries) } }

    func applyRemote(_ entries: [Entry], heldBack: [Entry], reason: ChangeReason) -> (changed: [StoreKey], refused: [RefusedEntry]) {
        let now = wall()
        return state.withLock { s in
            s.seen += entries.filter { $0.signature != nil }
            if s.seen.count > Self.remembered { s.seen.removeFirst(s.seen.count - Self.remembered) }
            return s.synced.applyRemote(entries, heldBack: heldBack, wall: now)
        }
    }

    func entry(forKey key: StoreKey) -> Entry? { state.withLock { $0.synced.entries[key] ?? $0.flood[key] } }
    func imposedLead(forKey key: StoreKey, origin: ReplicaID, sequence: UInt64) -> Replica.ImposedLead? { nil }
    func restampIfNeeded() -> Bool { false }
    var signerCertificates: [Data: Data] { state.withLock { $0.synced.certificates } }
    func keepCertificate(_ der: Data, signer: Data) { state.withLock { $0.synced.keepCertificate(der, signer: signer) } }
    var knownDevices: [DeviceID] { state.withLock { $0.synced.peerVectors.keys.compactMap(DeviceID.init(hex:)) } }
    func learnOfDevices(_ devices: [DeviceID]) { _ = state.withLock { $0.synced.learnOf(devices: devices.map(\.hex)) } }

    func notePeer(_ device: DeviceID, acknowledged vector: VersionVector) {
        let now = wall()
        _ = state.withLock { $0.synced.notePeer(device.hex, acknowledged: vector, wall: now) }
    }

    func onLocalChange(_ handler: @escaping @Sendable () -> Void) { state.withLock { $0.handler = handler } }
    var awaitingInitialSync: Bool { false }
    func initialSyncCompleted() {}

    // The member keeps no file (its durable vector is ``syncVector``, the protocol's default)
    // and is never told of a removal; it forgets as any replica does.
    func dropEntries(signedBy device: Data, stampedAfter removedAt: UInt64) -> Int {
        state.withLock { $0.synced.dropEntries(signedBy: device, stampedAfter: removedAt).count }
    }
    var wantsWhole: Bool { state.withLock { $0.synced.replica.wantsWhole } }
    func wholeReceived() { state.withLock { $0.synced.wholeReceived() } }
    func wantWhole() { state.withLock { $0.synced.wantWhole() } }
    func forgetDevice(_ device: DeviceID) {
        let now = wall()
        _ = state.withLock { $0.synced.forget(device: device.hex, wall: now) }
    }
}
