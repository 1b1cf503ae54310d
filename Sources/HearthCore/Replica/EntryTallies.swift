import Foundation

/// What a replica's current entries add up to, kept up to date as entries come and go, so that
/// the quota and the bounds on what one device may put in a store cost a lookup, not a pass
/// over every entry: the usage (visible values' bytes and keys), the entries each origin owns
/// (the origins worth a vector counter), the origins each device owns entries under, and what
/// each signer's entries take. Part of ``Replica``, which tells it of every entry it stores,
/// replaces or drops (and nothing else changes them).
package struct EntryTallies: Sendable, Equatable {
    package private(set) var usage = StoreUsage()
    /// How many current entries (tombstones included) each origin owns: the origins worth a
    /// counter in the vector.
    package private(set) var originEntries: [ReplicaID: Int] = [:]
    /// How many origins own a current entry here, by device (an origin's first 8 bytes,
    /// ``ReplicaID/devicePrefix``): for the bound on one device's origins
    /// (``Replica/maximumOriginsPerDevice``).
    package private(set) var deviceOrigins: [UInt64: Int] = [:]
    /// What each signing device's current entries take, for the bounds on what one device may
    /// put in a store (see `SyncReplica.applyRemote`).
    package private(set) var signerUsage: [Data: SignerUsage] = [:]

    /// The tallies of `entries`, a replica's current entries.
    init(of entries: some Sequence<Entry>) {
        for entry in entries { add(entry) }
    }

    /// The usage after replacing `old`, `key`'s entry, with `value` (`nil`: deleting it); `size`
    /// is the new entry's quota size if the caller measured it (``StoreLimits/check(key:value:)``).
    func usage(replacing old: Entry?, with value: PropertyListValue?, forKey key: StoreKey, size: Int?) -> StoreUsage {
        var u = usage
        if let old, !old.isTombstone {
            u.bytes -= old.quotaSize
            u.keys -= 1
        }
        if let value {
            u.bytes += size ?? key.utf8.count + value.canonicalSize
            u.keys += 1
        }
        return u
    }

    /// `entry` is now its key's current entry; the key had none.
    mutating func add(_ entry: Entry) {
        if !entry.isTombstone {
            usage.bytes += entry.quotaSize
            usage.keys += 1
        }
        count(entry, +1)
    }

    /// `entry` is no longer its key's current entry, and none took its place.
    mutating func remove(_ entry: Entry) {
        if !entry.isTombstone {
            usage.bytes -= entry.quotaSize
            usage.keys -= 1
        }
        count(entry, -1)
    }

    /// Replaces the entry at `index` of `entries` (a replica's) with `entry`, of the same key, in
    /// place: one hash lookup for the common case, a key written again.
    mutating func replace(at index: [StoreKey: Entry].Index, of entries: inout [StoreKey: Entry], with entry: Entry) {
        // The fields it needs, not a copy of the old entry (its key, value and signature).
        let (oldSize, oldTombstone, oldOrigin, oldSigned) = entries.values[index].withTallyFields
        if !oldTombstone {
            usage.bytes -= oldSize
            usage.keys -= 1
        }
        if !entry.isTombstone {
            usage.bytes += entry.quotaSize
            usage.keys += 1
        }
        // The same unsigned origin again (a device rewriting its key): the tallies stay as they are.
        guard oldOrigin != entry.origin || oldSigned || entry.withTallyFields.signed else {
            entries.values[index] = entry
            return
        }
        count(entries.values[index], -1)
        entries.values[index] = entry
        count(entry, +1)
    }

    /// Adds (`+1`) or removes (`-1`) `entry` in the per-origin and per-signer tallies.
    mutating func count(_ entry: Entry, _ sign: Int) {
        // Each table changed in place: one hash per table (a read then a write hashed twice, and
        // this runs twice for every entry applied), a second only to drop an emptied slot.
        let owned = Self.add(sign, to: &originEntries, at: entry.origin)
        if owned == 0 || (owned == 1 && sign > 0) {
            // The origin came to own its first entry, or lost its last.
            Self.add(sign, to: &deviceOrigins, at: entry.origin.devicePrefix)
        }
        guard let signer = entry.signature?.signer else { return }
        let emptied = { (tally: inout SignerUsage) -> Bool in
            if entry.isTombstone {
                tally.tombstones += sign
            } else {
                tally.bytes += sign * entry.quotaSize
                tally.keys += sign
            }
            return tally == SignerUsage()
        }(&signerUsage[signer, default: SignerUsage()])
        if emptied { signerUsage[signer] = nil }
    }

    /// Adds `delta` to `table[key]` in place and returns the sum; a slot that falls to 0 or below is dropped.
    @discardableResult
    private static func add<Key: Hashable>(_ delta: Int, to table: inout [Key: Int], at key: Key) -> Int {
        let total = { (count: inout Int) -> Int in
            count += delta
            return count
        }(&table[key, default: 0])
        if total <= 0 { table[key] = nil }
        return total
    }
}

private extension Entry {
    /// What ``EntryTallies`` reads of an entry being replaced.
    var withTallyFields: (quotaSize: Int, isTombstone: Bool, origin: ReplicaID, signed: Bool) {
        let signed: Bool
        if case .none = signature { signed = false } else { signed = true }
        return (quotaSize, isTombstone, origin, signed)
    }
}
