/// Per key, the entries a remote entry replaced, latest first: what comes back if its writer
/// turns out to be a removed device whose write ``Replica/dropEntries(signedBy:stampedAfter:)``
/// drops (docs/protocol.md, "Device removals"). At most two per key: the entry the current one
/// replaced and, if that is of the same writer, the latest entry of another writer before it (the
/// removed device's own earlier write may be dropped too, or stay). Saved; forgotten with the
/// key's collection or the tombstone horizon (``forget(before:entries:)``).
///
/// At a drop, the latest entry the dropped one replaced that is not the removed device's later
/// write too becomes current again: it may have reached only the devices that took the dropped
/// write (docs/simulator.md, finding 10). Peers that never took the dropped entries hold what they
/// replaced, which the replica's vector covers, so no peer would send it again unasked.
///
/// Its own type because it is one rule with its own memory, apart from what the replica holds:
/// the replica tells it each replacement and asks it at each drop.
package struct DisplacedEntries: Sendable, Equatable {
    package private(set) var byKey: [StoreKey: [Entry]]

    /// `byKey` as loaded, kept only for keys `entries` holds.
    init(_ byKey: [StoreKey: [Entry]], entries: [StoreKey: Entry]) {
        self.byKey = byKey.filter { entries[$0.key] != nil }
    }

    var isEmpty: Bool { byKey.isEmpty }
    var all: [Entry] { byKey.values.flatMap { $0 } }

    /// `remote` replaced `current`: keep `current` and, when both have one writer, the other
    /// writer's entry before it.
    mutating func note(_ current: Entry, replacedBy remote: Entry) {
        let other = Self.sameWriter(remote, current) ? byKey[remote.key]?.first { !Self.sameWriter($0, current) } : nil
        byKey[remote.key] = [current] + (other.map { [$0] } ?? [])
    }

    /// The latest entry `key`'s dropped entry had replaced that `isDoomed` spares, if any; the key's
    /// list goes either way.
    mutating func restore(_ key: StoreKey, sparing isDoomed: (Entry) -> Bool) -> Entry? {
        byKey.removeValue(forKey: key)?.first { !isDoomed($0) }
    }

    /// Forgets the entries `isDoomed` names: a removed device's later write never comes back.
    mutating func forget(_ isDoomed: (Entry) -> Bool) {
        byKey = byKey.compactMapValues { list in
            let kept = list.filter { !isDoomed($0) }
            return kept.isEmpty ? nil : kept
        }
    }

    /// Keeps only the keys `entries` holds (after a collection).
    mutating func keep(keysOf entries: [StoreKey: Entry]) {
        byKey = byKey.filter { entries[$0.key] != nil }
    }

    /// Forgets the keys whose current entry is stamped before `horizon` (the tombstone horizon):
    /// a removal that would drop it reaches a device within that time or, as for a tombstone, is
    /// no longer waited for. Returns how many keys went.
    mutating func forget(before horizon: HLCTimestamp, entries: [StoreKey: Entry]) -> Int {
        let before = byKey.count
        byKey = byKey.filter { key, _ in entries[key].map { $0.timestamp >= horizon } ?? false }
        return before - byKey.count
    }

    /// Whether two entries come from the same writer: the same signing device, or, unsigned (not
    /// signed yet, or a test's), the same origin.
    static func sameWriter(_ a: Entry, _ b: Entry) -> Bool {
        switch (a.signature?.signer, b.signature?.signer) {
        case let (x?, y?): x == y
        case (nil, nil): a.origin == b.origin
        case let (x?, nil): b.origin.isBound(to: x)
        case let (nil, y?): a.origin.isBound(to: y)
        }
    }
}
