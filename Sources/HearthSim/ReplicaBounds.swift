import Foundation
import HearthCore

/// The replica's bounds, checked after every delta an honest device applies (so a flood from
/// the hostile member that got past one shows at once): each signer's share of the store,
/// the origins of one device, the vector, the known devices, the holds. Together they bound a
/// replica's memory, counted in entries and origins (not bytes of RSS, which a run in one
/// process cannot tell apart).
///
/// Its own type because the bounds are the product's limits read back, apart from the
/// checker's model of what each device saw: it names what is broken, the checker records it.
enum ReplicaBounds {
    /// The most a replica may hold whatever its peers send: per signing device its live keys
    /// and tombstones, for every device it may know of, plus its own.
    static var maximumEntries: Int {
        (SyncedReplica.maximumKnownDevices + 1) * (StoreLimits.maximumSignerKeys + StoreLimits.maximumSignerTombstones)
    }

    /// What `replica` (holding back `held` origins) has beyond its bounds, each in a line.
    static func broken(_ replica: Replica, held: Int) -> [String] {
        var broken: [String] = []
        for (signer, usage) in replica.signerUsage {
            let name = Hex.encode(signer.prefix(4))
            if usage.keys > StoreLimits.maximumSignerKeys { broken.append("signer \(name) has \(usage.keys) live keys (bound \(StoreLimits.maximumSignerKeys))") }
            if usage.bytes > StoreLimits.maximumSignerBytes { broken.append("signer \(name) has \(usage.bytes) bytes (bound \(StoreLimits.maximumSignerBytes))") }
            if usage.tombstones > StoreLimits.maximumSignerTombstones {
                broken.append("signer \(name) has \(usage.tombstones) tombstones (bound \(StoreLimits.maximumSignerTombstones))")
            }
        }
        for (prefix, origins) in replica.deviceOrigins where origins > Replica.maximumOriginsPerDevice {
            broken.append("device \(String(prefix, radix: 16)) has \(origins) origins with entries (bound \(Replica.maximumOriginsPerDevice))")
        }
        if replica.vector.counters.count > Replica.maximumVectorOrigins {
            broken.append("the vector names \(replica.vector.counters.count) origins (bound \(Replica.maximumVectorOrigins))")
        }
        if replica.peerVectors.count > SyncedReplica.maximumKnownDevices {
            broken.append("\(replica.peerVectors.count) known devices (bound \(SyncedReplica.maximumKnownDevices))")
        }
        if held > SyncedReplica.maximumHeldOrigins { broken.append("\(held) holds (bound \(SyncedReplica.maximumHeldOrigins))") }
        if replica.entries.count > Self.maximumEntries { broken.append("\(replica.entries.count) entries (bound \(Self.maximumEntries))") }
        return broken
    }
}
