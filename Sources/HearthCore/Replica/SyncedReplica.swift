import Foundation

/// A store's replica together with every rule on what may enter it: the value behind each
/// `SyncReplica` (the store's, and the tests' in-memory ones), so that every replica admits
/// entries by the same code.
///
/// ``Replica`` is the data model: it merges whatever it is given. This adds the policy:
/// - writes made on this device, by this process (``write(_:forKey:size:wall:strict:restamp:)``)
///   or by a process attached to it (``applyAttachedWrite(_:device:wall:strict:)``): Apple's
///   store-wide quotas and strict mode, in one function (``admitLocalWrite(_:forKey:size:strict:)``),
///   after ``StoreLimits/check(key:value:)``'s per-entry rules;
/// - entries from peers, which the sync engine has verified and sorted already (signature,
///   signer not removed, timestamp within ``HybridLogicalClock/isAcceptable(_:wall:)``):
///   each signer's share of the store, the bound on one device's origins, and the entries
///   held back for later (``applyRemote(_:heldBack:wall:)``);
/// - what peers say of other devices: at most ``maximumKnownDevices`` known, tombstones
///   collected once every known peer has them or after ``tombstoneHorizon``.
///
/// A value with no I/O, no lock and no clock of its own (callers pass `wall`), like
/// ``Replica``: the store keeps one under its lock. Reads of the replica's properties go
/// through (`synced.entries`, `synced.usage`); changes only through these methods.
///
/// ```swift
/// var synced = SyncedReplica(Replica())
/// let (entry, _) = try synced.write(.string("blue"), forKey: "colour", size: 11, wall: now, strict: false)
/// let (changed, refused) = other.applyRemote(signedEntries, heldBack: [], wall: now)
/// ```
@dynamicMemberLookup
package struct SyncedReplica: Sendable {
    /// The entries, vector and clock.
    package private(set) var replica: Replica
    /// Keys whose entry may still lack a signature (local writes): the signer looks only at
    /// these instead of scanning the store on every push.
    private var unsignedKeys: Set<StoreKey>
    /// Per origin, the earliest entry refused for now (stamped too far ahead of our clock, or
    /// over its signer's share), kept without its value: the vector stays below it so that
    /// peers send it again (see ``applyRemote(_:heldBack:wall:)``).
    package private(set) var heldBack: [ReplicaID: Entry] = [:]
    /// What the vector would have advanced to, per entry, while entries were held back: made
    /// once none is (see ``applyRemote(_:heldBack:wall:)``, ``HeldOffAdvances``).
    private var deferredCover = HeldOffAdvances()
    /// Origins whose held entry the clock came to accept, and for which the peers' whole store
    /// was wanted (``askAgainForHeld(wall:)``): once per hold.
    private var askedAgain: Set<ReplicaID> = []

    /// How long a tombstone is kept when some known peer never acknowledges it (30 days).
    package static let tombstoneHorizon: UInt64 = 30 * 86_400_000

    /// At most this many origins have an entry held back: past them, a refused entry is simply
    /// covered by later ones (a peer making up origins cannot grow the list).
    package static let maximumHeldOrigins = 1024

    /// A household is a few devices; past this many known, devices heard of are not added
    /// (a misbehaving peer could otherwise grow the list, and the file, without bound).
    package static let maximumKnownDevices = 256

    package init(_ replica: Replica = Replica()) {
        self.replica = replica
        unsignedKeys = Self.unsigned(in: replica)
    }

    /// The replica's properties, read-only.
    package subscript<T>(dynamicMember keyPath: KeyPath<Replica, T>) -> T {
        replica[keyPath: keyPath]
    }

    /// The replica's properties read on every write and message (the host's forwarding, the
    /// engine's vector), spelled out: through the key-path member above, each read applies a
    /// key path across modules (a generic call with the path looked up at run time).
    package var entries: [StoreKey: Entry] { replica.entries }
    package var vector: VersionVector { replica.vector }
    package var usage: Replica.Usage { replica.usage }

    /// The value of `key` (nil for a tombstone or no entry): the store's `get`, called directly.
    /// Through the key-path member above, a read cost three times as much (6.4 M/s against
    /// 18.8 M/s for a small string, hearth-benchmarks --only local).
    package func value(forKey key: StoreKey) -> PropertyListValue? {
        replica.value(forKey: key)
    }

    /// Puts another replica in this one's place (an account switch, a store taken over from
    /// the process that hosted it, an attached copy's new view): nothing stays held back, and
    /// its unsigned entries are the ones to sign.
    package mutating func replace(with replica: Replica) {
        self.replica = replica
        unsignedKeys = Self.unsigned(in: replica)
        heldBack = [:]
        deferredCover = HeldOffAdvances()
        askedAgain = []
    }

    private static func unsigned(in replica: Replica) -> Set<StoreKey> {
        Set(replica.entries.values.filter { $0.signature == nil }.map(\.key))
    }

    // MARK: Writes made on this device

    /// Why a write made on this device is refused.
    package enum LocalRefusal: Error, Hashable, Sendable {
        /// It breaks one of ``StoreLimits``' per-entry rules.
        case entry(EntryRuleViolation)
        /// Strict mode (`discardWritesBeforeInitialSync`) and the first sync is still to come.
        case initialSyncPending
        /// The store would hold more than ``StoreLimits/maximumKeyCount`` keys.
        case tooManyKeys
        /// The store would hold `total` bytes, more than ``StoreLimits/maximumTotalSize``.
        case storeFull(total: Int)
    }

    /// The one rule for the store-wide limits of a write made on this device, whichever process
    /// made it: refused in strict mode (`strict`) before the first sync, and when it would take
    /// the store beyond ``StoreLimits/maximumKeyCount`` or ``StoreLimits/maximumTotalSize``,
    /// unless it shrinks or keeps the usage (so a full store can be edited down).
    ///
    /// `size` is the entry's quota size, from ``StoreLimits/check(key:value:)``; `value` is
    /// `nil` for a delete (or a write that changes nothing), which no quota refuses.
    package func admitLocalWrite(_ value: PropertyListValue?, forKey key: StoreKey, size: Int, strict: Bool) throws(LocalRefusal) {
        if strict, !replica.hasSynced { throw .initialSyncPending }
        guard let value else { return }
        // Far below both quotas (a write adds at most its own size and one key) the exact
        // figure, a lookup of the key's current entry, is not needed.
        let usage = replica.usage
        guard usage.keys >= StoreLimits.maximumKeyCount || usage.bytes + size > StoreLimits.maximumTotalSize else { return }
        let after = replica.usage(afterWriting: value, forKey: key, size: size)
        if after.keys > StoreLimits.maximumKeyCount && after.keys > usage.keys { throw .tooManyKeys }
        if after.bytes > StoreLimits.maximumTotalSize && after.bytes > usage.bytes { throw .storeFull(total: after.bytes) }
    }

    /// A write of this process (`nil` deletes), whose per-entry rules (`size`) were checked:
    /// refused by ``admitLocalWrite(_:forKey:size:strict:)``, or recorded, to be signed. With
    /// `restamp`, the entries written while this device's clock was ahead are first written
    /// again (``restampFutureEntries(wall:)``), as every local change does.
    ///
    /// Returns the new entry (`nil` for the delete of an absent key, which changes nothing)
    /// and the keys re-stamped.
    package mutating func write(_ value: PropertyListValue?, forKey key: StoreKey, size: Int, wall: UInt64, strict: Bool,
                                restamp: Bool = true) throws(LocalRefusal) -> (entry: Entry?, restamped: [StoreKey]) {
        try admitLocalWrite(value, forKey: key, size: size, strict: strict)
        let restamped = restamp ? restampFutureEntries(wall: wall) : []
        // The size measured before the lock: a large value is not walked again under it.
        guard let entry = replica.write(value, forKey: key, wall: wall, size: size) else { return (nil, restamped) }
        unsignedKeys.insert(key)
        return (entry, restamped)
    }

    /// A write that a process attached to this one stamped and sent (docs/local-attach.md): the
    /// same store-wide rules as this process's writes, then applied unsigned, as only this
    /// process signs (with this device's key). Its per-entry rules (``StoreLimits``) were
    /// applied once, where it came off the socket (`Entry.decode`, as for a peer's entry); its
    /// size is the one measured there. `device` is the signed-in device: a process that
    /// attached before an account switch may write under an origin of the previous device,
    /// which peers would refuse, so such entries become this device's. Returns the keys whose
    /// visible value changed.
    package mutating func applyAttachedWrite(_ entry: Entry, device: Data?, wall: UInt64, strict: Bool) throws(LocalRefusal) -> [StoreKey] {
        var entry = entry
        entry.signature = nil
        // One that loses to the current entry changes nothing: only strict mode refuses it.
        let wins = replica.entries[entry.key].map { entry.wins(over: $0) } ?? true
        try admitLocalWrite(wins ? entry.value : nil, forKey: entry.key, size: entry.quotaSize, strict: strict)
        if wins { replica.noteAttachedStamp(entry, wall: wall) }
        let changed = replica.apply([entry], coveredBy: nil, wall: wall)
        unsignedKeys.insert(entry.key)
        if let device, !entry.origin.isBound(to: device) {
            unsignedKeys.formUnion(replica.adoptUnboundEntries(of: device))
        }
        return changed
    }

    /// Writes again, with the current time, the entries stamped while this device's clock was
    /// ahead, once it is back (``Replica/restampFutureEntries(wall:)``): local writes to sign.
    ///
    /// Also asks again for entries held back that the clock now accepts (``askAgainForHeld(wall:)``).
    package mutating func restampFutureEntries(wall: UInt64) -> [StoreKey] {
        let restamped = replica.restampFutureEntries(wall: wall)
        unsignedKeys.formUnion(restamped)
        askAgainForHeld(wall: wall)
        return restamped
    }

    /// Wants the peers' whole store (``Replica/wantsWhole``) once for each entry held back that
    /// this device's clock now accepts: it was refused while the clock was behind (or the entry
    /// ahead), and its senders count it as sent, so only a new connection would bring it again,
    /// and a quiet household makes none: the household would disagree for as long as the links
    /// stay up (docs/simulator.md, finding 4).
    private mutating func askAgainForHeld(wall: UInt64) {
        guard !heldBack.isEmpty else { return }
        for (origin, held) in heldBack where !askedAgain.contains(origin) && HybridLogicalClock.isAcceptable(held.timestamp, wall: wall) {
            askedAgain.insert(origin)
            replica.wantsWhole = true
        }
    }

    /// Merges entries that another replica of this device admitted already (the host's, in a
    /// process attached to it) or that a test puts in as a peer's: no rule applies. Returns the
    /// keys whose visible value changed.
    package mutating func applyAdmitted(_ entries: [Entry], coveredBy vector: VersionVector?, wall: UInt64) -> [StoreKey] {
        replica.apply(entries, coveredBy: vector, wall: wall)
    }

    // MARK: Signing

    /// Entries without a signature yet (local writes), to sign off the writer's path.
    package mutating func unsignedEntries() -> [Entry] {
        guard !unsignedKeys.isEmpty else { return [] }
        let unsigned = unsignedKeys.compactMap { replica.entries[$0] }.filter { $0.signature == nil }
        unsignedKeys = Set(unsigned.map(\.key))
        return unsigned
    }

    /// Attaches signatures to the entries they were made for (ignored for entries that have
    /// since been replaced).
    package mutating func attachSignatures(_ signed: [Entry]) {
        for entry in signed {
            if let signature = entry.signature,
               replica.attach(signature, forKey: entry.key, origin: entry.origin, sequence: entry.sequence) {
                unsignedKeys.remove(entry.key)
            }
        }
    }

    /// Saves `der` with the replica as the certificate of `signer` (already verified).
    package mutating func keepCertificate(_ der: Data, signer: Data) {
        replica.keepCertificate(der, signer: signer)
    }

    /// Why the local write (`origin`, `sequence`) of `key`, this replica's or an attached
    /// process's, was stamped far ahead of this device's clock (``Replica/imposedLeads``); `nil`
    /// if it was not, or is not the latest.
    package func imposedLead(forKey key: StoreKey, origin: ReplicaID, sequence: UInt64) -> Replica.ImposedLead? {
        guard let lead = replica.imposedLeads[key], lead.sequence == sequence, origin == lead.writer ?? replica.id else { return nil }
        return lead
    }

    // MARK: Entries from peers

    /// Every current entry `peer` does not cover (``Replica/delta(for:)``).
    package func delta(for peer: VersionVector) -> [Entry] {
        replica.delta(for: peer)
    }

    /// The entries of `entries` that would change this replica (new keys, or winning by
    /// last-writer-wins over the current entry); the stamps of those that lose are kept
    /// (``Replica/winners(of:)``).
    package mutating func winningEntries(_ entries: [Entry]) -> [Entry] {
        let winners = replica.winners(of: entries)
        guard !heldBack.isEmpty else { return winners }
        // A re-stamp of a held entry ends the hold even if it loses here (the entry it replaces
        // will never come): it goes on to be verified and applied (``applyRemote(_:heldBack:wall:)``).
        let kept = Set(winners.map { EntryID(origin: $0.origin, sequence: $0.sequence) })
        return winners + entries.filter { entry in
            guard let held = heldBack[entry.origin], held.key == entry.key, entry.sequence > held.sequence else { return false }
            return !kept.contains(EntryID(origin: entry.origin, sequence: entry.sequence))
        }
    }

    private struct EntryID: Hashable {
        let origin: ReplicaID
        let sequence: UInt64
    }

    /// Applies verified entries from peers atomically, within each signer's share and the
    /// bound on one device's origins, and holds back what may be acceptable later: the
    /// contract of `SyncReplica.applyRemote(_:heldBack:reason:)`. Returns the keys whose
    /// visible value changed and the entries refused here.
    package mutating func applyRemote(_ entries: [Entry], heldBack refusedForNow: [Entry], wall: UInt64) -> (changed: [StoreKey], refused: [RefusedEntry]) {
        let (accepted, overQuota, newOrigin) = Self.withinSignerShares(entries, of: replica)
        hold(refusedForNow + overQuota)
        // While an entry is held back, the vector does not jump gaps: the sender may have
        // superseded, with the held entry, another origin's entry in any of them, which this
        // replica then has neither of (docs/simulator.md, finding 8). The jumps wait until no
        // entry is held back: each hold ended with its entry, or a later write of its key,
        // here, which beats whatever the sender superseded with it.
        let holding = !heldBack.isEmpty
        let changed = replica.apply(accepted, coveredBy: nil, wall: wall, overGaps: !holding)
        if holding {
            deferredCover.hold(accepted, in: replica)
            // A hold ends when the entry arrives, this replica has a later write of its key, or its
            // origin's re-stamp of it came (``Entry/wins(over:)``): the held entry will never come.
            var latest: [ReplicaID: UInt64] = [:]
            for entry in accepted where heldBack[entry.origin]?.key == entry.key { latest[entry.origin] = max(latest[entry.origin] ?? 0, entry.sequence) }
            var ended: [ReplicaID: UInt64] = [:]
            heldBack = heldBack.filter { origin, held in
                let end: Bool
                if let sequence = latest[origin], sequence > held.sequence {
                    end = true
                } else if let current = replica.entries[held.key] {
                    end = (current.origin == held.origin && current.sequence == held.sequence) || current.wins(over: held)
                } else {
                    end = false
                }
                if end { ended[origin] = held.sequence }
                return !end
            }
            // A hold is per origin, on its earliest entry: the origin's later entries refused with or
            // since it are not known here. Those refused in this delta are held now; for those refused
            // before, the vector stops at the ended hold (the held-off advances would jump them, and no
            // peer would send them again) and the peers' whole store brings them again.
            hold(refusedForNow + overQuota)
            for (origin, sequence) in ended where heldBack[origin] == nil {
                deferredCover.cap(origin, at: sequence)
                replica.wantsWhole = true
            }
            for held in heldBack.values { replica.uncover(held) }
            if !askedAgain.isEmpty { askedAgain = askedAgain.filter { heldBack[$0] != nil } }
            if heldBack.isEmpty {
                replica.cover(deferredCover.counters)
                deferredCover = HeldOffAdvances()
            }
        }
        // Entries of one origin too many are not held back (a hold would take a slot of the
        // 1,024 from honest holds); they are not covered either, so they come again on a new link.
        let refused = overQuota.map { entry in
            RefusedEntry(entry, reason: .signerQuota, detail: "the entries its signer wrote would take more of this store than one device may "
                         + "(\(StoreLimits.maximumSignerBytes) bytes, \(StoreLimits.maximumSignerKeys) keys, \(StoreLimits.maximumSignerTombstones) deletes)")
        } + newOrigin.map { entry in
            RefusedEntry(entry, reason: .signerQuota, detail: "its signer has \(Replica.maximumOriginsPerDevice) origins (runs) with entries in this store "
                         + "already, as many as one device may")
        }
        return (changed, refused)
    }

    /// Holds back each of `refused` not received already (then there is nothing to ask for
    /// again) and earlier than its origin's held entry, kept without its value: what a hold needs
    /// is the entry's key, origin, sequence and time.
    private mutating func hold(_ refused: [Entry]) {
        for entry in refused where !replica.vector.covers(entry) {
            if let held = heldBack[entry.origin], held.sequence <= entry.sequence { continue }
            guard heldBack[entry.origin] != nil || heldBack.count < Self.maximumHeldOrigins else { continue }
            var held = entry
            held.value = nil
            heldBack[entry.origin] = held
        }
    }

    /// Splits `entries` (in order) into those that keep every signer within its share of the
    /// store (`StoreLimits.maximumSigner…`), those that would take it beyond, and those that
    /// would give another device more than `Replica.maximumOriginsPerDevice` origins owning
    /// entries. An entry that shrinks its signer's share, or replaces nothing, is always within.
    package static func withinSignerShares(_ entries: [Entry], of replica: Replica) -> (accepted: [Entry], overQuota: [Entry], newOrigin: [Entry]) {
        var shares: [Data: Replica.SignerUsage] = [:]
        var current: [StoreKey: Entry] = [:]
        // Origins this delta brings, by device: one device may have at most
        // Replica.maximumOriginsPerDevice owning entries (this device's own are never bounded).
        var newOrigins: [UInt64: Set<ReplicaID>] = [:]
        func bringsOneOriginTooMany(_ entry: Entry) -> Bool {
            let device = entry.origin.devicePrefix
            guard device != replica.id.devicePrefix, replica.originEntries[entry.origin] == nil,
                  newOrigins[device]?.contains(entry.origin) != true else { return false }
            return (replica.deviceOrigins[device] ?? 0) + (newOrigins[device]?.count ?? 0) >= Replica.maximumOriginsPerDevice
        }
        var accepted: [Entry] = [], overQuota: [Entry] = [], newOrigin: [Entry] = []
        accepted.reserveCapacity(entries.count)
        func add(_ entry: Entry, _ sign: Int) {
            guard let signer = entry.signature?.signer else { return }
            var share = shares[signer] ?? replica.signerUsage[signer] ?? Replica.SignerUsage()
            if entry.isTombstone { share.tombstones += sign } else { share.bytes += sign * entry.quotaSize; share.keys += sign }
            shares[signer] = share
        }
        for entry in entries {
            let previous = current[entry.key] ?? replica.entries[entry.key]
            if let previous, !entry.wins(over: previous) {
                accepted.append(entry)      // loses: changes nothing
                continue
            }
            if bringsOneOriginTooMany(entry) {
                newOrigin.append(entry)
                continue
            }
            let before = entry.signature.map { shares[$0.signer] ?? replica.signerUsage[$0.signer] ?? Replica.SignerUsage() }
            if let previous { add(previous, -1) }
            add(entry, +1)
            if let signer = entry.signature?.signer, let before, let after = shares[signer],
               (after.bytes > StoreLimits.maximumSignerBytes && after.bytes > before.bytes)
                || (after.keys > StoreLimits.maximumSignerKeys && after.keys > before.keys)
                || (after.tombstones > StoreLimits.maximumSignerTombstones && after.tombstones > before.tombstones) {
                add(entry, -1)
                if let previous { add(previous, +1) }
                overQuota.append(entry)
                continue
            }
            current[entry.key] = entry
            if replica.originEntries[entry.origin] == nil { newOrigins[entry.origin.devicePrefix, default: []].insert(entry.origin) }
            accepted.append(entry)
        }
        return (accepted, overQuota, newOrigin)
    }

    // MARK: Peers

    /// Adds the devices (by device ID hex) a peer knows of as known, with nothing acknowledged
    /// yet, up to ``maximumKnownDevices``. Returns how many were left out for that bound.
    package mutating func learnOf(devices: [String]) -> Int {
        var ignored = 0
        for device in devices where replica.peerVectors[device] == nil {
            guard replica.peerVectors.count < Self.maximumKnownDevices else { ignored += 1; continue }
            replica.learnOf(device: device)
        }
        return ignored
    }

    /// Forgets a device (by device ID hex) known with nothing acknowledged, and collects what
    /// every device still known has (see ``notePeer(_:acknowledged:wall:)``): one noted when its
    /// link came up whose hello then did not list the store. Returns whether anything changed.
    package mutating func forget(device: String, wall: UInt64) -> Bool {
        guard replica.forget(device: device) else { return false }
        _ = collectTombstones(wall: wall)
        return true
    }

    /// Records what a peer (device ID hex) acknowledged and collects the tombstones every known
    /// peer has, or older than ``tombstoneHorizon``. Returns whether anything worth saving
    /// changed: an idle link's pings repeat the same vector and must not touch the disk.
    package mutating func notePeer(_ device: String, acknowledged vector: VersionVector, wall: UInt64) -> Bool {
        let before = replica.peerVectors[device]
        replica.notePeer(device, acknowledged: vector)
        let collected = collectTombstones(wall: wall)
        return collected > 0 || replica.peerVectors[device] != before
    }

    /// Collects the tombstones every known peer has that waited for the clock to reach them, once
    /// it has (``Replica/collectReachedTombstones(olderThan:wall:)``; on the engine's heartbeat).
    /// Returns how many went.
    package mutating func collectReachedTombstones(wall: UInt64) -> Int {
        replica.collectReachedTombstones(olderThan: Self.horizon(wall: wall), wall: wall)
    }

    /// The stamp before which a tombstone goes whoever lacks it (``tombstoneHorizon`` before `wall`).
    private static func horizon(wall: UInt64) -> HLCTimestamp {
        HLCTimestamp(milliseconds: wall &- tombstoneHorizon, counter: 0)
    }

    /// Collects the tombstones every known peer has, or older than ``tombstoneHorizon``, and
    /// forgets the entries displaced before that horizon (``Replica/forgetDisplaced(before:)``).
    private mutating func collectTombstones(wall: UInt64) -> Int {
        let horizon = Self.horizon(wall: wall)
        replica.forgetDisplaced(before: horizon)
        return replica.collectStableTombstones(olderThan: horizon, wall: wall)
    }

    /// Drops the entries of a removed device stamped after its removal, which this replica took
    /// before it heard of it (``Replica/dropEntries(signedBy:stampedAfter:)``). Returns the entries
    /// dropped (the values among them are visible changes).
    package mutating func dropEntries(signedBy device: Data, stampedAfter removedAt: UInt64) -> [Entry] {
        replica.dropEntries(signedBy: device, stampedAfter: removedAt)
    }

    /// A peer's whole store came in (``Replica/wantsWhole``).
    package mutating func wholeReceived() {
        replica.wantsWhole = false
    }

    /// A peer that dropped entries asked for this replica's whole store: the peer's is wanted too
    /// (``Replica/wantsWhole``: until it comes, its entries of keys with no entry here get in).
    package mutating func wantWhole() {
        replica.wantsWhole = true
    }

    /// Marks the first download from the account's peers as done.
    package mutating func initialSyncCompleted() {
        replica.hasSynced = true
    }
}
