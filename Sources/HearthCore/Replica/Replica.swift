import Foundation

/// One (store, account) replica's data: the entries with their metadata, its version
/// vector and its clock.
///
/// A value type with no I/O, no locks and no wall clock of its own (callers pass `wall`),
/// so every behaviour is deterministic and testable in isolation. The store keeps one
/// behind a lock; the sync engine merges into it.
///
/// ```swift
/// var a = Replica(), b = Replica()
/// let entry = a.write(.string("blue"), forKey: "colour")!
/// let changed = b.apply([entry], coveredBy: a.vector)   // ["colour"]
/// ```
package struct Replica: Sendable, Equatable {
    package typealias Usage = StoreUsage

    package let id: ReplicaID
    package private(set) var clock: HybridLogicalClock
    /// The sequence number of this replica's latest local write.
    package private(set) var sequence: UInt64
    package private(set) var vector: VersionVector
    /// Every key's current entry, tombstones included.
    package private(set) var entries: [StoreKey: Entry]
    /// What the current entries add up to, kept as they change (``EntryTallies``).
    package private(set) var tallies: EntryTallies
    package var usage: Usage { tallies.usage }
    package var originEntries: [ReplicaID: Int] { tallies.originEntries }
    package var deviceOrigins: [UInt64: Int] { tallies.deviceOrigins }
    package var signerUsage: [Data: SignerUsage] { tallies.signerUsage }
    /// Tombstone collection's state: the origins it retired, the removal awaiting the clock.
    package private(set) var tombstones = TombstoneCollection()
    /// Origins of collected tombstones, kept in the vector (``TombstoneCollection/retiredOrigins``).
    package var retiredOrigins: Set<ReplicaID> { tombstones.retiredOrigins }
    /// The peer devices known here and what each acknowledged (``KnownPeers``).
    package private(set) var peers: KnownPeers
    /// The vector each peer device (by device ID hex) last acknowledged.
    package var peerVectors: [String: VersionVector] { peers.vectors }
    /// Keys whose latest local write was stamped far ahead of this device's clock because the
    /// entry it replaced was (see ``write(_:forKey:wall:size:)``); not saved.
    package private(set) var imposedLeads = ImposedLeads()
    /// Whether this replica has had its first download from the account's peers.
    package var hasSynced = false
    /// Set when ``dropEntries(signedBy:stampedAfter:)`` dropped entries: the peers' whole store
    /// is wanted (what they had replaced), until one has come. Saved, so that a device that
    /// stops before then asks again when it comes back.
    package var wantsWhole = false
    /// Stamps no longer on its entries that later stamps must still beat: the highest collected
    /// removal, and each key's superseded entries (saved; see ``StampHistory``).
    package private(set) var history = StampHistory()
    /// Re-stamping's state: the latest stamp of this replica's own entries (``FutureStamps``).
    package private(set) var futureStamps: FutureStamps
    /// What remote entries replaced here, for a removed device's dropped writes (``DisplacedEntries``).
    private var displacedEntries: DisplacedEntries
    package var displaced: [StoreKey: [Entry]] { displacedEntries.byKey }
    /// The DER certificates of devices that signed entries, by signer (``SignerCertificates``).
    package private(set) var signerCertificates: SignerCertificates
    package var certificates: [Data: Data] { signerCertificates.bySigner }

    /// What one signing device's current entries take (``signerUsage``).
    package typealias SignerUsage = HearthCore.SignerUsage
    /// Why a local write was stamped ahead of this device's clock (``ImposedLeads``).
    package typealias ImposedLead = HearthCore.ImposedLead

    /// An empty replica.
    package init(id: ReplicaID = .random()) {
        self.init(id: id, clock: HybridLogicalClock(), sequence: 0, vector: VersionVector(), entries: [:],
                  peerVectors: [:], certificates: [:])
    }

    /// A replica restored from saved state. The local sequence is raised to at least what the
    /// entries show, so a damaged header can never make the replica reuse a sequence number it
    /// has already given out.
    ///
    /// The clock is not raised to the entries' timestamps: some may be a peer's, stamped up to
    /// ``HybridLogicalClock/maximumDrift`` ahead, and the clock must not follow them (see
    /// ``HybridLogicalClock``). Nothing needs it to: a write is stamped after the entry of its
    /// key in any case (``write(_:forKey:wall:size:)``), which is all last-writer-wins compares.
    package init(id: ReplicaID, clock: HybridLogicalClock, sequence: UInt64, vector: VersionVector,
                entries: [StoreKey: Entry], peerVectors: [String: VersionVector] = [:],
                certificates: [Data: Data] = [:], history: StampHistory = StampHistory(),
                displaced: [StoreKey: [Entry]] = [:]) {
        self.id = id
        self.displacedEntries = DisplacedEntries(displaced, entries: entries)
        self.history = StampHistory(collected: history.collected, superseded: history.superseded) { entries[$0] != nil }
        var sequence = max(sequence, vector[id])
        var vector = vector
        for entry in entries.values {
            if entry.origin == id { sequence = max(sequence, entry.sequence) }
            vector.advance(origin: entry.origin, to: entry.sequence)
        }
        vector.advance(origin: id, to: sequence)
        self.clock = clock
        self.sequence = sequence
        self.vector = vector
        self.entries = entries
        futureStamps = FutureStamps(of: id, in: entries)
        tallies = EntryTallies(of: entries.values)
        peers = KnownPeers(peerVectors)
        signerCertificates = SignerCertificates(certificates)
    }

    // MARK: Reading

    /// The visible value of `key`: `nil` when absent or deleted.
    package func value(forKey key: StoreKey) -> PropertyListValue? {
        entries[key]?.value
    }

    /// Every visible key and value.
    package var visibleValues: [StoreKey: PropertyListValue] {
        var result: [StoreKey: PropertyListValue] = [:]
        result.reserveCapacity(usage.keys)
        for (key, entry) in entries { if let value = entry.value { result[key] = value } }
        return result
    }

    /// The usage after replacing `key`'s value with `value` (`nil`: deleting it); `size` is the
    /// new entry's quota size if the caller measured it (``StoreLimits/check(key:value:)``).
    package func usage(afterWriting value: PropertyListValue?, forKey key: StoreKey, size: Int? = nil) -> Usage {
        tallies.usage(replacing: entries[key], with: value, forKey: key, size: size)
    }

    // MARK: Local writes

    /// Records a local write (or, with `nil`, a delete) and returns the new entry.
    ///
    /// Returns `nil` and changes nothing when deleting a key that has no visible value,
    /// as Apple's `removeObject(forKey:)` does nothing for an absent key.
    @discardableResult
    package mutating func write(_ value: PropertyListValue?, forKey key: StoreKey,
                               wall: UInt64, size: Int? = nil) -> Entry? {
        if value == nil, entries[key]?.value == nil { return nil }
        sequence += 1
        var timestamp = clock.tick(wall: wall)
        if let current = entries[key], current.timestamp >= timestamp {
            // Ahead of the clock (which follows a peer's stamps only up to a minute ahead): a
            // write made after seeing a value still beats it, here and on every peer that
            // takes it, but the clock is not moved, so this device's other writes are not
            // dragged into that future (where peers whose clocks are behind refuse them).
            timestamp = HybridLogicalClock.successor(of: current.timestamp)
        } else if entries[key] == nil {
            // The key's removal may have been collected (see `collectTombstones`): the write still beats it.
            timestamp = history.stampForNewKey(after: timestamp)
        }
        if let current = entries[key] { history.note(current.timestamp, forKey: key) }
        imposedLeads.note(timestamp, replacing: entries[key], forKey: key, wall: wall, sequence: sequence, ownOrigin: id)
        let entry = Entry(key: key, value: value, timestamp: timestamp, origin: id, sequence: sequence, quotaSize: size)
        store(entry)
        futureStamps.noteOwn(timestamp)
        vector.advance(origin: id, to: sequence)
        return entry
    }

    // MARK: Merging

    /// Merges one entry by last-writer-wins. Returns whether the key's visible value changed.
    ///
    /// The version vector is not touched: a delta advances it as a whole, once every entry
    /// of the delta is in (see ``apply(_:coveredBy:wall:)``).
    @discardableResult
    package mutating func merge(_ remote: Entry, wall: UInt64) -> Bool {
        clock.observe(remote.timestamp, wall: wall)
        if let current = entries[remote.key] {
            guard remote.wins(over: current) else {
                history.noteLoser(remote, against: current)
                return false
            }
            history.note(current.timestamp, forKey: remote.key)
            // The origin re-stamped an entry its clock had set in the future: what that entry beat
            // here, and every entry a relay superseded with it (which this vector then covers without
            // this replica ever seeing it), may beat the re-stamp. Peers that held the future entry
            // back still have them: ask for their whole store (docs/protocol.md, "A clock set right again").
            if remote.restamps(current) { wantsWhole = true }
            // Kept for when `remote` is dropped as a removed device's later write (then the
            // latest of these not dropped too comes back): a writer replacing its own entry
            // keeps the other writer's entry before it as well.
            displacedEntries.note(current, replacedBy: remote)
            store(remote)
            return current.value != remote.value
        }
        // It lost to a removal collected here ahead of the wall clock, which peers still hold.
        guard !history.losesToCollectedRemoval(remote) else { return false }
        store(remote)
        return remote.value != nil
    }

    /// The entries of `entries` that win over this replica's entry of their key: what a delta
    /// would change. Those that lose (but the current entry sent again) leave their stamp in
    /// ``history``: the sync engine drops them without applying them (or verifying
    /// them: a forged stamp can only make a re-stamped entry later, within the drift bound).
    ///
    /// An entry of a key with no entry here that the vector covers lost too: this replica had it
    /// (or a later entry of its origin) and it was replaced, by a removal since collected. Sent
    /// again (a member replaying old entries), it would bring the removed value back here alone,
    /// for good: every peer's vector covers it too (docs/simulator.md, finding 6). An origin whose
    /// counter compaction dropped is not covered, and its old entries still win. Except while
    /// ``wantsWhole``: ``dropEntries(signedBy:stampedAfter:)`` left keys with no entry whose
    /// earlier entries the vector covers, and the peers' whole store brings them back (until it
    /// has come, a replay of a collected removal's older value gets in too: the price of healing).
    package mutating func winners(of entries: [Entry]) -> [Entry] {
        var winners: [Entry] = []
        winners.reserveCapacity(entries.count)
        for entry in entries {
            guard let current = self.entries[entry.key] else {
                if (wantsWhole || !vector.covers(entry)) && !history.losesToCollectedRemoval(entry) { winners.append(entry) }
                continue
            }
            guard !entry.wins(over: current) else {
                winners.append(entry)
                continue
            }
            history.noteLoser(entry, against: current)
        }
        return winners
    }

    /// Applies a delta atomically (this is a value type: callers apply to a copy and keep
    /// it only if the whole delta was acceptable), then advances the vector to cover the
    /// delta's entries and `coveredBy` (the sender's vector, when the delta is everything
    /// the sender had beyond ours).
    ///
    /// Without `overGaps` the vector advances, per origin, only over sequences this replica
    /// holds (the delta's and its current entries), from its counter up: the caller holds back an
    /// entry the sender may have superseded other origins' entries with (``HeldOffAdvances``).
    ///
    /// Returns the keys whose visible value changed, in the order of the delta.
    @discardableResult
    package mutating func apply(_ delta: [Entry], coveredBy senderVector: VersionVector? = nil,
                               wall: UInt64, overGaps: Bool = true) -> [StoreKey] {
        var before: [StoreKey: PropertyListValue?] = [:]
        var order: [StoreKey] = []
        for entry in delta {
            if before.index(forKey: entry.key) == nil {
                before[entry.key] = .some(value(forKey: entry.key))
                order.append(entry.key)
            }
            merge(entry, wall: wall)
            if overGaps { vector.advance(origin: entry.origin, to: entry.sequence) }
        }
        if !overGaps { HeldOffAdvances.advanceWithoutGaps(&vector, over: delta, entries: entries) }
        if let senderVector { vector.formUnion(senderVector) }
        compactVector()
        // Compare with the start, not per entry: a key changed twice may be back where it was.
        return order.filter { before[$0]! != value(forKey: $0) }
    }

    /// Advances the vector to `counters` (what per-entry advances held off while entries were
    /// held back, once none is: ``HeldOffAdvances``).
    package mutating func cover(_ counters: VersionVector) {
        vector.formUnion(counters)
        compactVector()
    }

    /// Every current entry, tombstones included, that `peer` does not cover and this replica's
    /// vector does, in sequence order per origin (so a receiver can advance a vector as it goes).
    ///
    /// An entry beyond our own vector (a later write of an origin one of whose entries is held
    /// back, ``uncover(_:)``, or whose counter compaction dropped) is not sent: the receiver
    /// advances its vector to each entry it applies, so it would cover the held entry, which
    /// we lack, and no peer would send it that entry again (docs/simulator.md, finding 5).
    /// Such entries reach it from the peers that cover them.
    package func delta(for peer: VersionVector) -> [Entry] {
        entries.values
            .filter { !peer.covers($0) && vector.covers($0) }
            .sorted { ($0.origin, $0.sequence) < ($1.origin, $1.sequence) }
    }

    /// Lowers the vector below `entry`, so that peers send it again: the receiver refused it
    /// for now (see `SyncReplica.applyRemote(_:heldBack:reason:)`), and a later entry of the
    /// same origin must not make it look received.
    package mutating func uncover(_ entry: Entry) {
        vector.lower(origin: entry.origin, to: entry.sequence &- 1)
    }

    // MARK: Signatures

    /// Attaches a signature to `key`'s entry, if that entry is still the one signed.
    @discardableResult
    package mutating func attach(_ signature: EntrySignature, forKey key: StoreKey, origin: ReplicaID,
                                sequence: UInt64) -> Bool {
        guard var entry = entries[key], entry.origin == origin, entry.sequence == sequence else { return false }
        tallies.count(entry, -1)
        entry.signature = signature
        entries[key] = entry
        tallies.count(entry, +1)
        return true
    }

    // MARK: A clock that was ahead

    /// Writes again, with the current time, every entry stamped more than
    /// ``HybridLogicalClock/maximumDrift`` ahead of `wall`, once this replica's clock shows that
    /// its wall clock was ahead and has been set right (``FutureStamps``, documented there).
    /// Returns the keys written again.
    @discardableResult
    package mutating func restampFutureEntries(wall: UInt64) -> [StoreKey] {
        guard let (future, restarted) = futureStamps.due(wall: wall, id: id, clock: clock, entries: entries) else { return [] }
        if let restarted { clock = restarted }
        let bound = wall &+ HybridLogicalClock.maximumDrift
        for old in future {
            sequence += 1
            // After every stamp of the key seen here within the bound; as in `write`, the clock is not moved.
            let timestamp = history.restamp(clock.tick(wall: wall), forKey: old.key, within: bound)
            store(Entry(key: old.key, value: old.value, timestamp: timestamp, origin: id, sequence: sequence))
        }
        vector.advance(origin: id, to: sequence)
        futureStamps.recount(of: id, in: entries)
        if !future.isEmpty { wantsWhole = true }
        return future.map(\.key)
    }

    // MARK: A removed device's later writes

    /// Drops every current entry signed by `device` and stamped after `removedAt` (milliseconds
    /// since 1970): writes of a device removed from the account, which every device that knows
    /// of the removal refuses (`removedSigner`). Returns the entries dropped.
    ///
    /// This replica took them before it heard of the removal (a thief's copy met while away); what
    /// each replaced comes back (``DisplacedEntries``), and the caller asks its peers for their
    /// whole store and gives them its own (docs/protocol.md, "Device removals"). The vector is left
    /// as it is: lowered, it would stop this replica from relaying its own writes its peers lack.
    @discardableResult
    package mutating func dropEntries(signedBy device: Data, stampedAfter removedAt: UInt64) -> [Entry] {
        func isDoomed(_ entry: Entry) -> Bool { entry.signature?.signer == device && entry.timestamp.milliseconds > removedAt }
        let doomed = entries.values.filter(isDoomed)
        for entry in doomed {
            if let earlier = displacedEntries.restore(entry.key, sparing: isDoomed) {
                store(earlier)
                vector.advance(origin: earlier.origin, to: earlier.sequence)
            } else {
                entries[entry.key] = nil
                tallies.remove(entry)
            }
        }
        // A displaced entry that is itself the removed device's later write can never come back.
        displacedEntries.forget(isDoomed)
        if !doomed.isEmpty {
            compactVector()
            wantsWhole = true
        }
        return doomed.sorted { $0.key < $1.key }
    }

    // MARK: Origins bound to devices

    /// Moves this replica's own entries that are not under an origin bound to `device` (written
    /// by a build before origins were bound, or while signed out) to its own origin, keeping
    /// their keys, values and timestamps: new sequence numbers under ``id``, unsigned (the sync
    /// engine signs them). Entries signed by other devices stay as they are. Returns the keys
    /// moved.
    ///
    /// Keeping the timestamp keeps last-writer-wins as it was: a later write elsewhere still
    /// wins over the moved entry, and the moved entry ties its old self on value.
    @discardableResult
    package mutating func adoptUnboundEntries(of device: Data) -> [StoreKey] {
        let unbound = entries.values.filter { entry in
            (entry.signature == nil || entry.signature?.signer == device) && !entry.origin.isBound(to: device)
        }.sorted { ($0.timestamp, $0.origin) < ($1.timestamp, $1.origin) }
        for old in unbound {
            sequence += 1
            store(Entry(key: old.key, value: old.value, timestamp: old.timestamp, origin: id, sequence: sequence))
        }
        vector.advance(origin: id, to: sequence)
        if !unbound.isEmpty { compactVector() }
        return unbound.map(\.key)
    }

    // MARK: Reopening

    /// This replica's data under a new replica ID, for a new run of the store.
    ///
    /// A run that crashed may have sent peers writes it never saved; giving the next run's
    /// writes fresh (origin, sequence) pairs means they can never be mistaken for those, and
    /// the lost writes come back from the peers that have them, as any other origin's would.
    /// Vector counters of origins that no longer have a current entry are dropped, the
    /// ``retiredOrigins`` too: at worst a peer sends such an entry again, and it loses to what
    /// replaced it (or, a tombstone, is collected again).
    package func reopened(as id: ReplicaID) -> Replica {
        let origins = Set(entries.values.map(\.origin))
        var copy = Replica(id: id, clock: clock, sequence: 0,
                           vector: VersionVector(vector.counters.filter { origins.contains($0.key) }),
                           entries: entries, peerVectors: peerVectors, certificates: certificates,
                           history: history, displaced: displaced)
        copy.hasSynced = hasSynced
        copy.wantsWhole = wantsWhole
        return copy
    }

    // MARK: Signers' certificates (``SignerCertificates``, documented there)

    package mutating func keepCertificate(_ der: Data, signer: Data) { signerCertificates.keepCertificate(der, signer: signer) }
    /// The certificates of the devices that signed a current entry: what is worth saving.
    package var certificatesInUse: [Data: Data] {
        displaced.isEmpty ? signerCertificates.certificatesInUse(by: entries.values)
            : signerCertificates.certificatesInUse(by: Array(entries.values) + displacedEntries.all)
    }

    // MARK: Peers and tombstones

    // Who is known, and what each acknowledged (``KnownPeers``, documented there).
    package mutating func notePeer(_ device: String, acknowledged peerVector: VersionVector) { peers.note(device, acknowledged: peerVector) }
    package mutating func learnOf(device: String) { peers.learnOf(device: device) }
    package mutating func forget(device: String) -> Bool { peers.forget(device: device) }

    /// What every known peer and this replica have all seen; `nil` with no known peer.
    package var stableVector: VersionVector? { peers.stable(with: vector) }

    /// Removes tombstones that `stable` covers or older than `horizon`, once this replica's clock
    /// has reached them (``TombstoneCollection``, documented there). Returns how many went.
    @discardableResult
    package mutating func collectTombstones(coveredBy stable: VersionVector? = nil,
                                           olderThan horizon: HLCTimestamp? = nil, wall: UInt64? = nil) -> Int {
        collectTombstones(covering: .given(stable), olderThan: horizon, wall: wall)
    }

    /// ``collectTombstones(coveredBy:olderThan:wall:)`` with ``stableVector``, without working it
    /// out (``TombstoneCollection/Covering/stable``).
    @discardableResult
    package mutating func collectStableTombstones(olderThan horizon: HLCTimestamp? = nil, wall: UInt64? = nil) -> Int {
        collectTombstones(covering: .stable, olderThan: horizon, wall: wall)
    }

    private mutating func collectTombstones(covering: TombstoneCollection.Covering,
                                            olderThan horizon: HLCTimestamp?, wall: UInt64?) -> Int {
        let collected = tombstones.collect(covering: covering, olderThan: horizon, wall: wall, peers: peers, vector: vector,
                                           entries: &entries, tallies: &tallies, clock: &clock, history: &history)
        if collected > 0 {
            // A collected key's displaced entries go with it (``displaced``).
            displacedEntries.keep(keysOf: entries)
            compactVector()
        }
        return collected
    }

    /// The earliest tombstone due but not yet reached by the clock (``TombstoneCollection/awaitingClock``).
    package var tombstoneAwaitingClock: HLCTimestamp? { tombstones.awaitingClock }

    /// Collects as ``collectStableTombstones(olderThan:wall:)`` does, if a tombstone every peer
    /// has was waiting for the clock and the clock (or `wall`) has reached it
    /// (``TombstoneCollection/isReached(clock:wall:)``); else does nothing, at no cost.
    @discardableResult
    package mutating func collectReachedTombstones(olderThan horizon: HLCTimestamp?, wall: UInt64) -> Int {
        guard tombstones.isReached(clock: clock.last, wall: wall) else { return 0 }
        return collectTombstones(covering: .stable, olderThan: horizon, wall: wall)
    }

    /// Forgets the displaced entries (``displaced``) whose key's current entry is stamped before
    /// `horizon` (the tombstone horizon): a removal that would drop it reaches a device within
    /// that time or, as for a tombstone, is no longer waited for. Returns how many went.
    @discardableResult
    package mutating func forgetDisplaced(before horizon: HLCTimestamp) -> Int {
        displacedEntries.forget(before: horizon, entries: entries)
    }

    // MARK: Compact vectors

    /// At most this many origins have a counter in a vector, so that a hello stays small
    /// (a few hundred kilobytes at most) whatever peers send.
    package static let maximumVectorOrigins = 4096

    /// At most this many origins of one other device may own current entries in a replica
    /// (`SyncReplica.applyRemote` refuses, as `signerQuota`, a peer's entry that would make
    /// one more), so that one device cannot fill the vector with made-up origins and have
    /// honest ones evicted. A device makes one origin per run of a store, and one keeps a
    /// counter only while one of its entries is current: more than 2,048 (a signer's share of
    /// keys) would take 2,048 runs each leaving a write of a key no later run wrote again.
    package static let maximumOriginsPerDevice = 2048

    /// Keeps counters only for origins that own a current entry, this replica's own and the
    /// ``retiredOrigins``, at most ``maximumVectorOrigins`` of them, shared fairly among
    /// devices past that bound (``VectorCompaction``).
    package mutating func compactVector() {
        let kept = VectorCompaction(of: self).keptCounters
        tombstones.retain(kept)
        if kept.count != vector.counters.count { vector = VersionVector(kept) }
    }

    // MARK: Private

    /// As for a local write, for a write an attached process of this device made (before it
    /// replaces the current entry): the attached process knows why it stamped it ahead, but a
    /// peer's refusal of it comes to this replica's engine, which would otherwise blame this
    /// device's clock ("0.0 h ahead").
    package mutating func noteAttachedStamp(_ entry: Entry, wall: UInt64) {
        imposedLeads.note(entry.timestamp, replacing: entries[entry.key], forKey: entry.key, wall: wall,
                          writer: entry.origin, sequence: entry.sequence, ownOrigin: id)
    }

    private mutating func store(_ entry: Entry) {
        // One hash lookup for the common case, a key written again: read and replace in place.
        guard let index = entries.index(forKey: entry.key) else {
            entries[entry.key] = entry
            tallies.add(entry)
            return
        }
        tallies.replace(at: index, of: &entries, with: entry)
    }
}
