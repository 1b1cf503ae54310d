import Foundation

/// For each origin replica, the highest sequence number this replica has applied, or
/// that a later winning write has made irrelevant.
///
/// An entry (origin, sequence) is *covered* by a vector when `vector[origin] >= sequence`;
/// a peer sends exactly the entries the other's vector does not cover.
package struct VersionVector: Hashable, Sendable {
    package private(set) var counters: [ReplicaID: UInt64]

    package init(_ counters: [ReplicaID: UInt64] = [:]) {
        self.counters = counters.filter { $0.value > 0 }
    }

    package subscript(origin: ReplicaID) -> UInt64 {
        counters[origin] ?? 0
    }

    package func covers(origin: ReplicaID, sequence: UInt64) -> Bool {
        self[origin] >= sequence
    }

    package func covers(_ entry: Entry) -> Bool {
        covers(origin: entry.origin, sequence: entry.sequence)
    }

    /// Whether every counter of `other` is covered by this vector.
    package func dominates(_ other: VersionVector) -> Bool {
        other.counters.allSatisfy { self[$0.key] >= $0.value }
    }

    /// Raises `origin`'s counter to `sequence` (never lowers it).
    package mutating func advance(origin: ReplicaID, to sequence: UInt64) {
        // One lookup, in place (a local write advances its own origin every time).
        guard sequence > 0 else { return }
        func raise(_ counter: inout UInt64) { if sequence > counter { counter = sequence } }
        raise(&counters[origin, default: 0])
    }

    /// Lowers `origin`'s counter to `sequence` (never raises it).
    package mutating func lower(origin: ReplicaID, to sequence: UInt64) {
        guard sequence < self[origin] else { return }
        counters[origin] = sequence > 0 ? sequence : nil
    }

    /// This vector with only the origins `other` names: what a peer says it has, cut to what
    /// is worth remembering (a peer's counters for origins this replica does not know would
    /// never decide what it sends, and a peer could make up any number of them).
    package func restricted(to other: VersionVector) -> VersionVector {
        guard counters.contains(where: { other.counters[$0.key] == nil }) else { return self }
        return VersionVector(counters.filter { other.counters[$0.key] != nil })
    }

    /// This vector with only the origins `isIncluded` accepts.
    package func filter(_ isIncluded: (ReplicaID) -> Bool) -> VersionVector {
        VersionVector(counters.filter { isIncluded($0.key) })
    }

    /// The pointwise maximum.
    package mutating func formUnion(_ other: VersionVector) {
        for (origin, sequence) in other.counters { advance(origin: origin, to: sequence) }
    }

    package func union(_ other: VersionVector) -> VersionVector {
        var copy = self
        copy.formUnion(other)
        return copy
    }

    /// The pointwise minimum over origins present in both (what all of them have seen).
    package func intersection(_ other: VersionVector) -> VersionVector {
        var result: [ReplicaID: UInt64] = [:]
        for (origin, sequence) in counters {
            let theirs = other[origin]
            if theirs > 0 { result[origin] = min(sequence, theirs) }
        }
        return VersionVector(result)
    }

    /// The canonical bytes a hello's vector digest hashes: a domain tag, the counter count,
    /// then each (origin, counter) in ascending origin order.
    ///
    /// ```text
    /// "hearth-vector-v1" 00 · u32 count · (16-byte origin · u64 counter)*
    /// ```
    package var signingBytes: [UInt8] {
        var w = CanonicalWriter(capacity: 24 + counters.count * 24)
        w.writeBytes(Array("hearth-vector-v1".utf8) + [0])
        w.writeUInt32(UInt32(counters.count))
        for origin in counters.keys.sorted() {
            w.writeBytes(origin.bytes)
            w.writeUInt64(counters[origin]!)
        }
        return w.bytes
    }
}

extension VersionVector: CustomStringConvertible {
    package var description: String {
        "{" + counters.keys.sorted().map { "\($0): \(counters[$0]!)" }.joined(separator: ", ") + "}"
    }
}
