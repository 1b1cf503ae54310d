/// The version-vector advances a replica holds off while its ``SyncedReplica`` holds an entry
/// back (docs/simulator.md, finding 8): the counters the vector would have reached, and the rule
/// by which it advances meanwhile, over no gap.
///
/// A per-entry advance also covers the origin's earlier entries the sender did not send, which
/// is sound only if the sender superseded each with an entry this replica has. An entry held
/// back may have superseded one of any origin, in any gap; covered, no peer would send it again.
/// One rule with its own state and reason, apart from merging (``Replica``) and from admission
/// (``SyncedReplica/applyRemote(_:heldBack:wall:)``, which keeps one and has the replica cover
/// its counters once it holds no entry back).
package struct HeldOffAdvances: Sendable {
    /// What the vector would have advanced to, per entry, while entries were held back.
    package private(set) var counters = VersionVector()

    package init() {}

    /// Notes the per-entry advances `accepted` would have made in `replica`.
    package mutating func hold(_ accepted: [Entry], in replica: Replica) {
        for entry in accepted { counters.advance(origin: entry.origin, to: entry.sequence) }
        // Bounded as the vector is: an origin that owns no entry keeps no counter anyway.
        counters = counters.filter { replica.originEntries[$0] != nil }
    }

    /// Keeps `origin`'s counter at most `sequence`: its hold ended there, and entries after it may
    /// have been refused (``SyncedReplica/applyRemote(_:heldBack:wall:)``).
    package mutating func cap(_ origin: ReplicaID, at sequence: UInt64) {
        if counters[origin] > sequence { counters.lower(origin: origin, to: sequence) }
    }

    /// Advances each origin of `delta` in `vector` over the sequences following its counter that
    /// the replica holds, an entry of the delta or a current one (`entries`), and stops at the
    /// first it lacks.
    ///
    /// If the replica holds one of the sender's entries back, the entry it superseded may be of
    /// any origin, in any gap: covered, no peer would send it again, and peers would collect it,
    /// a removal, while the replica shows the older value (docs/simulator.md, finding 8).
    package static func advanceWithoutGaps(_ vector: inout VersionVector, over delta: [Entry], entries: [StoreKey: Entry]) {
        let origins = Set(delta.map(\.origin))
        var held: [ReplicaID: Set<UInt64>] = [:]
        for entry in delta { held[entry.origin, default: []].insert(entry.sequence) }
        for entry in entries.values where origins.contains(entry.origin) { held[entry.origin]!.insert(entry.sequence) }
        for (origin, sequences) in held {
            var counter = vector[origin]
            while sequences.contains(counter + 1) { counter += 1 }
            vector.advance(origin: origin, to: counter)
        }
    }
}
