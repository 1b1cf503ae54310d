import Foundation
import HearthCore
import HearthIdentity

/// Links as one connection knows them (docs/protocol.md, "Relays"), part of its
/// ``SessionState``: whether the peer takes `links` messages, the devices it has a session with
/// (what they write, they push to it themselves, so we relay direct first), the links we last
/// told it, and the stores whose vector it is to be told soon (it is linked to their writers).
package struct PeerLinks: Sendable {
    /// Whether the peer's hello said it understands `links`: older builds are sent none.
    package var takesLinks = false
    /// The devices the peer has a session with now, besides us (its last `links`). What they
    /// wrote, they push to it themselves: we do not relay it (docs/protocol.md, "Relays").
    package private(set) var devices = Set<DeviceID>()
    /// The devices our last `links` named (none before the first).
    package private(set) var told: [Data] = []
    /// Stores whose vector we are to tell the peer soon (``scheduleVectorTell(of:)``).
    package private(set) var vectorTells = Set<String>()

    /// Whether the peer is linked to one of `writers` (device prefixes).
    func linked(toAnyOf writers: Set<UInt64>) -> Bool {
        devices.contains(where: { writers.contains(ReplicaID.devicePrefix(of: $0.data)) })
    }

    /// The peer's links now (a `links` message); returns the device prefixes of the links gone.
    mutating func update(_ devices: Set<DeviceID>) -> Set<UInt64> {
        let gone = self.devices.subtracting(devices)
        self.devices = devices
        return Set(gone.map { ReplicaID.devicePrefix(of: $0.data) })
    }

    /// Whether `devices`, our links now, are news to the peer (then they are noted as told).
    mutating func toTell(_ devices: [Data]) -> Bool {
        guard devices != told else { return false }
        told = devices
        return true
    }

    /// Notes that our vector of `name` is to be told soon; false if already scheduled.
    mutating func scheduleVectorTell(of name: String) -> Bool { vectorTells.insert(name).inserted }

    /// The time to tell our vector of `name` has come: false if it was not scheduled.
    mutating func vectorTellDue(of name: String) -> Bool { vectorTells.remove(name) != nil }
}
