import Foundation

/// Why a local write was stamped ahead of this device's clock: the entry it replaced.
package struct ImposedLead: Sendable, Hashable {
    /// The sequence number of the local write (under this replica's ``id``).
    package var sequence: UInt64
    /// The device that signed the replaced entry (its ID bytes); `nil` if unsigned.
    package var signer: Data?
    /// The replaced entry's origin.
    package var origin: ReplicaID
    /// How far ahead of this device's wall clock the replaced entry was stamped, in ms.
    package var lead: UInt64
    /// Whose write it is when not this replica's: a process attached to this one (`hearth
    /// set` through an app that holds the store), which stamped it after the value it
    /// replaced in its own copy; this replica's engine is the one told of its refusal.
    package var writer: ReplicaID?

    package init(sequence: UInt64, signer: Data?, origin: ReplicaID, lead: UInt64, writer: ReplicaID? = nil) {
        self.sequence = sequence
        self.signer = signer
        self.origin = origin
        self.lead = lead
        self.writer = writer
    }
}

/// The keys whose latest local write was stamped far ahead of this device's clock because the
/// entry it replaced was, with who stamped that one: what the writer is told if a peer refuses
/// the write as `clockAhead` (perhaps after the key was written again elsewhere), instead of
/// blaming this device's clock. At most one per key; kept by ``Replica`` (not saved).
package struct ImposedLeads: Sendable, Equatable {
    private var byKey: [StoreKey: ImposedLead] = [:]

    package init() {}

    package subscript(key: StoreKey) -> ImposedLead? { byKey[key] }
    package var isEmpty: Bool { byKey.isEmpty }

    /// Records (or forgets) why `key`'s new local write is stamped `timestamp`: beyond what this
    /// device's clock allows, `current` (the entry it replaces) set it; kept across rewrites of
    /// the key here. `writer`: an attached process's write, nil for the replica's own
    /// (`ownOrigin`).
    package mutating func note(_ timestamp: HLCTimestamp, replacing current: Entry?, forKey key: StoreKey, wall: UInt64,
                               writer: ReplicaID? = nil, sequence: UInt64, ownOrigin: ReplicaID) {
        guard timestamp.milliseconds > wall &+ HybridLogicalClock.maximumLead, let current else {
            if !byKey.isEmpty { byKey[key] = nil }
            return
        }
        if current.origin == (writer ?? ownOrigin), var kept = byKey[key], kept.writer == writer {
            kept.sequence = sequence
            byKey[key] = kept
            return
        }
        byKey[key] = ImposedLead(sequence: sequence, signer: current.signature?.signer, origin: current.origin,
                                 lead: current.timestamp.milliseconds &- min(wall, current.timestamp.milliseconds), writer: writer)
    }
}
