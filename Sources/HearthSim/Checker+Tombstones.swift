import Foundation
import HearthCore

/// Tombstone collection (docs/simulator.md, "Invariants"): a removal's tombstone goes once
/// every device has it, and not before.
extension Checker {
    static let tombstones = "tombstones are collected once every device has them"

    /// `device` collected `tombstones` of `store`: every other honest device must hold each
    /// (or a later write of its key), in memory, as the model says (a device that is down holds
    /// what it last saved). A hostile member is not asked: what it claims is its own loss.
    func collected(_ tombstones: [Entry], device: Int, store: String) {
        // A removed device is no member to hold them, nor its collections any member's loss.
        let out = removals.withLock { $0.out }
        guard !out.contains(device) else { return }
        for tombstone in tombstones {
            for other in honest where other != device && !out.contains(other) {
                let held = modelEntry(device: other, store: store, key: tombstone.key)
                guard let held, Self.same(held, tombstone) || Self.beats(held, tombstone) else {
                    fail(Self.tombstones, "d\(device) \(store) collected \(Self.describe(tombstone)) while d\(other) holds \(Self.describe(held))")
                    break
                }
            }
        }
    }

    /// At quiescence: no replica keeps a tombstone that its own rule would collect (covered by
    /// what every peer it knows acknowledged, and reached by its clock); and, when every device
    /// is honest, none keeps one that every device has (each one's vector covers it).
    /// `wall` is the time the clocks showed when the workload ended (all set right then): a
    /// tombstone stamped before it was reached by every clock during the quiet spell, whatever
    /// the replica's logical clock says; one stamped later, by a clock that was ahead, is
    /// collected only at an acknowledgement after the clocks reach it, which a quiet household
    /// may not send (finding 9), so only the replica's own clock says it was reached.
    func checkTombstones(_ replicas: [String: [(device: Int, replica: Replica)]], wall: UInt64, everyDeviceHonest: Bool) {
        let removed = removals.withLock { $0.ids }
        for (store, holders) in replicas.sorted(by: { $0.key < $1.key }) {
            for (device, replica) in holders {
                let stable = replica.stableVector
                for tombstone in replica.entries.values.filter(\.isTombstone).sorted(by: { $0.key.string < $1.key.string }) {
                    let reached = tombstone.timestamp <= replica.clock.last || tombstone.timestamp.milliseconds <= wall
                    if reached, stable?.covers(tombstone) == true {
                        fail(Self.tombstones, "d\(device) \(store) keeps \(Self.describe(tombstone)), which every peer it knows acknowledged")
                        break
                    }
                    // A removed device the replica still knows of, which never acknowledged it,
                    // holds it back until the 30-day horizon (finding 11).
                    let heldByRemoved = removed.contains { replica.peerVectors[$0].map { !$0.covers(tombstone) } ?? false }
                    if everyDeviceHonest, reached, !heldByRemoved, holders.allSatisfy({ $0.replica.vector.covers(tombstone) }) {
                        fail(Self.tombstones, "d\(device) \(store) keeps \(Self.describe(tombstone)), which every device has")
                        break
                    }
                }
            }
        }
    }
}
