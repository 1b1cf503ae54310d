/// The peer devices a replica knows, by device ID (hex), each with the vector it last
/// acknowledged: what it is known to have. Tombstones that all of them cover can go
/// (``Replica/stableVector``); a known device that acknowledged nothing holds them back. Part
/// of ``Replica``, saved with it.
package struct KnownPeers: Sendable, Equatable {
    package private(set) var vectors: [String: VersionVector]

    init(_ vectors: [String: VersionVector]) {
        self.vectors = vectors
    }

    /// Records what `device` has acknowledged.
    mutating func note(_ device: String, acknowledged peerVector: VersionVector) {
        vectors[device, default: VersionVector()].formUnion(peerVector)
    }

    /// Records `device` as known, with nothing acknowledged yet, unless it is known already.
    mutating func learnOf(device: String) {
        if vectors[device] == nil { vectors[device] = VersionVector() }
    }

    /// Forgets `device` as known if it has acknowledged nothing here; returns whether it did.
    mutating func forget(device: String) -> Bool {
        guard vectors[device]?.counters.isEmpty == true else { return false }
        vectors[device] = nil
        return true
    }

    /// Whether ``stable(with:)`` covers `entry`, without working it out: `ours` and every known
    /// peer cover it (a vector covers an entry when its counter for the entry's origin reaches
    /// the entry's sequence, and the intersection's counter is the least of theirs).
    func allCover(_ entry: Entry, with ours: VersionVector) -> Bool {
        !vectors.isEmpty && ours.covers(entry) && vectors.values.allSatisfy { $0.covers(entry) }
    }

    /// What every known peer and `ours` have all seen; `nil` with no known peer.
    func stable(with ours: VersionVector) -> VersionVector? {
        guard !vectors.isEmpty else { return nil }
        return vectors.values.reduce(ours) { $0.intersection($1) }
    }
}
