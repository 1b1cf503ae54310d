import Foundation
import HearthCore
import HearthIdentity

/// What one delta of a store to a peer is computed against, direct first (docs/protocol.md,
/// "Relays, direct first"): what a device the peer is linked to wrote, that device pushes to the
/// peer itself (it pushes its writes to every peer), so it is left out; in a mesh a change then
/// crosses each of its writer's links once, not every link. Only for devices we sync the store
/// with (so we know they serve it), never our own writes nor the peer's. A value: decided
/// without a link or replica (`RelayRoutingTests`).
package struct DeltaPlan: Sendable, Equatable {
    /// What the delta is computed against: what the peer is known to have, with what was left
    /// to its links before and is now.
    package private(set) var basis: VersionVector
    /// Of our vector, what is left to the peer's links this time.
    package private(set) var deferred: VersionVector
    /// The writers (device prefixes) left to the peer's links.
    package let leftOut: Set<UInt64>

    /// - Parameters:
    ///   - known: what the peer is known to have, with what we deferred to its links before
    ///     (``SessionState/deltaBasis(of:)``).
    ///   - linked: the devices the peer is linked to (none for a link's first delta, which is whole).
    ///   - sharers: the devices whose sessions sync the store with us now.
    ///   - us: this device; `peer`: the one the delta goes to.
    ///   - vector: our vector of the store now (read only if something is left out).
    package init(known: VersionVector, linked: Set<DeviceID>, sharers: @autoclosure () -> Set<DeviceID>,
                 us: DeviceID, peer: DeviceID, vector: @autoclosure () -> VersionVector) {
        var basis = known
        var deferred = VersionVector()
        var leftOut = Set<UInt64>()
        if !linked.isEmpty {
            let writers = linked.intersection(sharers()).subtracting([us, peer])
            leftOut = Set(writers.map { ReplicaID.devicePrefix(of: $0.data) })
            if !leftOut.isEmpty {
                deferred = vector().filter { leftOut.contains($0.devicePrefix) }
                basis.formUnion(deferred)
            }
        }
        self.basis = basis
        self.deferred = deferred
        self.leftOut = leftOut
    }

    /// Of the entries computed against ``basis`` (with `vector`, our vector they were read
    /// with), those that go: none of a writer left out. The basis was taken from our vector
    /// when the plan was made; a left-out writer's entry that reached us since (another
    /// session applied it, or while the signer ran) is beyond it, and sent, it would bring the
    /// peer's vector up to it over the writer's earlier entries still on their way over the
    /// peer's own link to the writer: if that link then drops, the peer covers entries it never
    /// got and no one sends them again. They are left to the link like the rest (and deferred).
    package mutating func leavingOut(_ entries: [Entry], vector: VersionVector) -> [Entry] {
        guard !leftOut.isEmpty else { return entries }
        let now = vector.filter { leftOut.contains($0.devicePrefix) }
        deferred.formUnion(now)
        basis.formUnion(now)
        return entries.filter { !leftOut.contains($0.origin.devicePrefix) }
    }

    /// Whether a delta of `entries` up to `vector` is worth sending: not when the peer lacks
    /// nothing (its state showed it has it all, or an earlier delta carried these writes). The
    /// peer drew the same conclusion from our state, so an empty first delta is not needed to
    /// end its initial sync.
    package func worthSending(entries: Int, vector: VersionVector) -> Bool {
        entries > 0 || !basis.dominates(vector)
    }

    /// What the peer is known to have once a delta up to `vector` went to it: what was left to
    /// its links is not (only deferred).
    package func sent(_ vector: VersionVector) -> VersionVector {
        leftOut.isEmpty ? vector : vector.filter { !leftOut.contains($0.devicePrefix) }
    }
}
