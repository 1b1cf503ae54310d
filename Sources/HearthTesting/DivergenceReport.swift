import Foundation
import Hearth
import HearthCore

/// What a cluster that did not converge tells (``LoopbackCluster``'s convergence waits): for
/// each key whose value the replicas disagree on, what entry each holds (value or tombstone,
/// timestamp, origin and sequence); which replicas'
/// vectors cover the winning entry (the one that beats every other held) without holding it
/// or a later one, for whom no peer will send it again (a vector that covers an entry it
/// never got); and each replica's whole vector, held-back entries and known peers' vectors.
///
/// A type of its own so the cluster stays about running replicas, and this about reading them.
struct DivergenceReport {
    /// The replicas compared (their indices in the cluster).
    let chosen: [Int]
    /// Each one's visible values.
    let values: [[String: PropertyListValue]]
    /// Each one's replica and held-back entries, read once.
    let states: [(replica: Replica, heldBack: [ReplicaID: Entry])]

    var text: String {
        let keys = Set(values.flatMap(\.keys)).filter { key in !values.allSatisfy { $0[key] == values[0][key] } }
        guard !keys.isEmpty else { return "" }
        let replicas = states.map(\.replica)
        func entry(_ entry: Entry?) -> String {
            guard let entry else { return "none" }
            return "\(entry.isTombstone ? "tombstone" : "value") \(entry.timestamp) \(entry.origin)#\(entry.sequence)"
        }
        func vector(_ vector: VersionVector) -> String {
            "{" + vector.counters.map { "\($0.key) \($0.value)" }.sorted().joined(separator: ", ") + "}"
        }
        var lines = keys.sorted().map { key in
            let held = replicas.map { $0.entries[StoreKey(key)] }
            // With the stamps it replaced for the key (kept by the replica's history): whether it once held the winner.
            let entries = zip(chosen, zip(held, replicas)).map { index, state in
                let replaced = state.1.history.superseded[StoreKey(key)] ?? []
                return "replica \(index): \(entry(state.0))" + (replaced.isEmpty ? "" : " (replaced \(replaced.map { "\($0)" }.joined(separator: ",")))")
            }
            let winner = held.compactMap { $0 }.reduce(nil as Entry?) { best, next in best.map { next.wins(over: $0) ? next : $0 } ?? next }
            // Covering the winner without holding it or a later entry of the key: nothing will bring it.
            let lacking = winner.map { winner in
                zip(chosen, replicas).filter { _, replica in
                    guard replica.vector.covers(winner) else { return false }
                    guard let current = replica.entries[StoreKey(key)] else { return true }
                    return !(current.origin == winner.origin && current.sequence == winner.sequence) && !current.wins(over: winner)
                }.map(\.0)
            } ?? []
            return "\(key): " + entries.joined(separator: " | ") + "; winner \(entry(winner)); covered but not held by replicas "
                + (lacking.isEmpty ? "none" : lacking.map(String.init).joined(separator: ","))
        }
        for (index, state) in zip(chosen, states) {
            lines.append("replica \(index) (origin \(state.replica.id)): vector \(vector(state.replica.vector)); tombstones collected up to \(state.replica.history.collected)")
            if !state.heldBack.isEmpty { lines.append("  held back: " + state.heldBack.values.map { entry($0) }.sorted().joined(separator: "; ")) }
            for (peer, acknowledged) in state.replica.peerVectors.sorted(by: { $0.key < $1.key }) {
                lines.append("  peer \(peer.prefix(8)) acknowledged (saved) \(vector(acknowledged))")
            }
        }
        return "\nkeys that differ (replicas \(chosen.map(String.init).joined(separator: " | "))):\n" + lines.joined(separator: "\n")
    }
}
