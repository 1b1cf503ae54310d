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

    /// A replica of `device` took an acknowledgement (`SyncedReplica.notePeer`, which tries to
    /// collect then) with its wall clock at `wall`; 0 for a new replica (a run, an account switch).
    func acknowledged(device: Int, store: String, wall: UInt64) {
        lastAcknowledgement.withLock { $0["d\(device) \(store)"] = wall }
    }

    /// At quiescence: no replica keeps a tombstone that its own rule would collect (covered by
    /// what every peer it knows acknowledged, and reached by its clock); and, when every device
    /// is honest, none keeps one that every device has (each one's vector covers it).
    /// "Reached" is what the rule saw at the replica's last acknowledgement, the only time it
    /// runs (`SyncedReplica.notePeer`): the stamp not after the replica's clock, or its wall
    /// clock then. A tombstone that a clock reaches later (one stamped ahead, or a clock behind
    /// set right at the workload's end) is collected only at a later acknowledgement, which a
    /// quiet household may not send (finding 9).
    func checkTombstones(_ replicas: [String: [(device: Int, replica: Replica)]], everyDeviceHonest: Bool) {
        let removed = removals.withLock { $0.ids }
        for (store, holders) in replicas.sorted(by: { $0.key < $1.key }) {
            for (device, replica) in holders {
                let stable = replica.stableVector
                for tombstone in replica.entries.values.filter(\.isTombstone).sorted(by: { $0.key.string < $1.key.string }) {
                    let lastAcknowledgement = lastAcknowledgement.withLock { $0["d\(device) \(store)"] ?? 0 }
                    let reachedThen = tombstone.timestamp <= replica.clock.last || tombstone.timestamp.milliseconds <= lastAcknowledgement
                    if reachedThen, stable?.covers(tombstone) == true {
                        fail(Self.tombstones, "d\(device) \(store) keeps \(Self.describe(tombstone)), which every peer it knows acknowledged")
                        break
                    }
                    // A removed device the replica still knows of, which never acknowledged it,
                    // holds it back until the 30-day horizon (finding 11).
                    let heldByRemoved = removed.contains { replica.peerVectors[$0].map { !$0.covers(tombstone) } ?? false }
                    if everyDeviceHonest, reachedThen, !heldByRemoved, holders.allSatisfy({ $0.replica.vector.covers(tombstone) }) {
                        fail(Self.tombstones, "d\(device) \(store) keeps \(Self.describe(tombstone)), which every device has")
                        break
                    }
                }
            }
        }
    }
}
