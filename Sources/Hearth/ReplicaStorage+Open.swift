import Foundation
import HearthCore
import Logging

extension ReplicaStorage {
    /// Opens (locking) and loads the replica file at `location` on `disk`; a fresh replica if none.
    /// Each run writes under a new replica ID (see `Replica.reopened(as:)`), drawn from `random`.
    ///
    /// `device` is the signed-in device's ID (nil when signed out): an account's replica writes
    /// under an origin bound to it (see `ReplicaID.random(boundTo:)`), and its own entries under
    /// an origin that is not (an earlier build's, or signed-out writes) move to that origin.
    package static func open(_ location: StoreLocation, on disk: any StoreDisk, device: Data?, logger: Logger,
                     wall: @escaping @Sendable () -> UInt64, random: @escaping @Sendable () -> UInt64) throws(PersistenceError) -> (ReplicaStorage, Replica) {
        let storage = try ReplicaStorage(location: location, disk: disk, logger: logger, wall: wall, random: random)
        let id = ReplicaID.random(boundTo: device, bits: random)
        var replica: Replica
        switch try storage.load() {
        case .fresh, .recovered: replica = Replica(id: id)
        case .loaded(let loaded), .loadedSettingAside(let loaded, _, _): replica = loaded.reopened(as: id)
        }
        if let device {
            let moved = replica.adoptUnboundEntries(of: device)
            if !moved.isEmpty {
                logger.notice("moved \(moved.count) entries of this device to an origin bound to it (written by an earlier build)",
                              metadata: ["store": "\(location.storeIdentifier)"])
            }
        }
        return (storage, replica)
    }
}
