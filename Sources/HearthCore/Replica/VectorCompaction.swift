/// Which origins keep a counter in a replica's version vector (``Replica/compactVector()``):
/// those that own a current entry, the replica's own and its ``Replica/retiredOrigins``, at most
/// ``Replica/maximumVectorOrigins`` of them.
///
/// Dropping a counter is always safe for the data: a peer then sends that origin's entries
/// again, and each loses to (or equals) what the replica holds. It bounds what a hello
/// carries and what a peer can make a replica remember: a made-up origin lasts only as long
/// as one of its entries is current here (or, once its tombstones are collected, this run).
///
/// Past the bound, the slots are shared fairly among devices (an origin's first 8 bytes
/// are its device's, ``ReplicaID/random(boundTo:)``): a device with more origins than its
/// share loses its extra ones (those owning the fewest entries, acknowledged by every peer
/// first), a device within it loses none. One device making up thousands of origins thus
/// evicts only its own; had the counters gone by entries owned, it would evict the
/// origins of honest devices, whose writes then reached this replica but were never
/// covered by its vector, so never confirmed.
struct VectorCompaction {
    /// The replica whose vector is compacted (a copy-on-write view of it, read only).
    let replica: Replica

    init(of replica: Replica) {
        self.replica = replica
    }

    /// The counters the vector keeps.
    var keptCounters: [ReplicaID: UInt64] {
        let id = replica.id
        var kept = replica.vector.counters.filter {
            $0.key == id || replica.originEntries[$0.key] != nil || replica.retiredOrigins.contains($0.key)
        }
        if kept.count > Replica.maximumVectorOrigins {
            let allowed = fairShare(of: kept.keys.filter { $0 != id }, slots: Replica.maximumVectorOrigins - (kept[id] == nil ? 0 : 1)).union([id])
            kept = kept.filter { allowed.contains($0.key) }
        }
        return kept
    }

    /// At most `slots` of `origins`: every origin of each device with at most a fair share,
    /// the share of a device with more (the largest share that fits, its origins ranked by
    /// whether some peer still lacks their entries, then by entries owned).
    private func fairShare(of origins: [ReplicaID], slots: Int) -> Set<ReplicaID> {
        let stable = replica.stableVector
        let byDevice = Dictionary(grouping: origins, by: \.devicePrefix).values.sorted { $0.count < $1.count }
        var allowed = Set<ReplicaID>()
        var left = slots
        for (index, group) in byDevice.enumerated() {
            let share = left / (byDevice.count - index)
            guard group.count > share else {
                allowed.formUnion(group)
                left -= group.count
                continue
            }
            func rank(_ origin: ReplicaID) -> (Int, Int, ReplicaID) {
                let unacknowledged = stable.map { $0[origin] < replica.vector[origin] } ?? true
                return (unacknowledged ? 1 : 0, replica.originEntries[origin] ?? 0, origin)
            }
            allowed.formUnion(group.map { (rank($0), $0) }.sorted { $0.0 > $1.0 }.prefix(share).map(\.1))
            left -= share
        }
        return allowed
    }
}
