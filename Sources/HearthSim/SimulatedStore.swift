import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import Hearth
import Logging

/// One store of one simulated device: the product's `SyncedReplica` (every rule on what enters
/// it) behind a lock, as the store's backend holds it, saved by the product's `ReplicaStorage`
/// on the device's `SimulatedDisk` within ``writeBehind`` of the first unsaved change (the
/// store's write-behind, on virtual time). Every change is shown to the ``Checker``.
///
/// Not the store backend itself (`StoreBackend`, Hearth): its notifications run on a
/// `DispatchQueue`, off the simulation's thread (docs/simulator.md).
final class SimulatedStore: SyncReplica {
    private struct State {
        var synced: SyncedReplica
        var handler: (@Sendable () -> Void)?
        var generation = 0
        var savedGeneration = 0
        var saveScheduled = false
        /// The vector of the replica as last saved (its file's, when opened).
        var savedVector: VersionVector
        /// The device crashed: this object is what its memory was, and does nothing more.
        var dead = false
        /// The file of the account the store is on (another's after an account switch).
        var storage: ReplicaStorage
        /// The store's name to the ``Checker``: its identifier on the household's account,
        /// another on the other account's (``switchAccount(to:opened:device:checkedAs:logger:)``).
        var checked: String
    }

    let storeIdentifier: String
    let device: Int
    private let state: Locked<State>
    private let wall: @Sendable () -> UInt64
    private let checker: Checker
    private let executor: SimulationExecutor
    private let trace: Trace
    /// A bug planted on purpose (`--plant`), to show that the invariants catch it.
    private let plant: Plant?
    /// The app listening to the store's notifications (none without account switches).
    let app: SimulatedApp?
    /// How long after the first unsaved change a save comes (the store's default).
    static let writeBehind = Duration.seconds(1)

    /// The bugs `--plant` puts in every store, to see the invariants fail (the simulator's own test).
    enum Plant: String, Sendable, CaseIterable {
        /// A peer's removals are not applied (the vector still advances past them).
        case dropRemoteDeletes = "drop-remote-deletes"
        /// Every run of a device opens its stores under the replica IDs of its first run
        /// (planted in ``Household``: what a restart reusing its ID gives out again, peers have).
        case sameReplicaID = "same-replica-id"
        /// An account switch merges the set it leaves into the one it opens, as a sign-in from
        /// signed out does (`AccountSwitch.replace` told it signs in): the other account's writes
        /// come back with the device.
        case switchMerges = "switch-merges"
        /// An account switch posts no notification.
        case silentSwitch = "silent-switch"
    }

    init(device: Int, storeIdentifier: String, replica: Replica, storage: ReplicaStorage, wall: @escaping @Sendable () -> UInt64,
         checker: Checker, executor: SimulationExecutor, trace: Trace, plant: Plant?, app: SimulatedApp? = nil) {
        self.plant = plant
        self.app = app
        self.device = device
        self.storeIdentifier = storeIdentifier
        state = Locked(State(synced: SyncedReplica(replica), savedVector: replica.vector, storage: storage, checked: storeIdentifier))
        self.wall = wall
        self.checker = checker
        self.executor = executor
        self.trace = trace
        // A new replica: no acknowledgement yet (the tombstones' liveness check).
        checker.acknowledged(device: device, store: storeIdentifier, wall: 0)
    }

    var replica: Replica { state.withLock { $0.synced.replica } }

    /// The store's name to the checker now (its identifier unless on the other account).
    var checked: String { state.withLock { $0.checked } }

    /// An app's write (`nil` removes), as the store makes it: the same rules, unsigned (the
    /// engine signs it), saved within a second. Returns the entry written, if any.
    @discardableResult
    func write(_ value: PropertyListValue?, forKey key: StoreKey) -> Entry? {
        let size: Int
        do { size = try StoreLimits.check(key: key, value: value) } catch {
            trace.log("d\(device) \(storeIdentifier) write \(key.string) refused: \(error)")
            return nil
        }
        let now = wall()
        let outcome = state.withLock { s -> (entry: Entry?, prior: Entry?, restamped: [StoreKey], handler: (@Sendable () -> Void)?)? in
            guard !s.dead else { return nil }
            // Seen before the write re-stamps what its clock wrote in the future (then not the prior).
            let prior = s.synced.entries[key]
            guard let (entry, restamped) = try? s.synced.write(value, forKey: key, size: size, wall: now, strict: false) else { return nil }
            if entry != nil || !restamped.isEmpty { s.generation += 1 }
            return (entry, prior, restamped, entry != nil || !restamped.isEmpty ? s.handler : nil)
        }
        guard let outcome else { return nil }
        restamped(outcome.restamped.filter { $0 != key })
        if let entry = outcome.entry {
            trace.log("d\(device) \(storeIdentifier) write \(Checker.describe(entry))")
            let restamp = outcome.restamped.contains(key)
            checker.wrote(entry, replacing: restamp ? nil : outcome.prior, restamp: restamp, device: device, store: checked, now: entry(forKey:))
        }
        outcome.handler?()
        scheduleSave()
        return outcome.entry
    }

    /// Entries the replica wrote again with its clock set right: new local writes to the model.
    private func restamped(_ keys: [StoreKey]) {
        guard !keys.isEmpty else { return }
        trace.log("d\(device) \(storeIdentifier) restamped \(keys.count) entries")
        for key in keys {
            if let entry = entry(forKey: key) { checker.wrote(entry, replacing: nil, restamp: true, device: device, store: checked, now: entry(forKey:)) }
        }
    }

    // MARK: Saving

    private func scheduleSave() {
        let schedule = state.withLock { s -> Bool in
            guard !s.dead, !s.saveScheduled, s.generation != s.savedGeneration else { return false }
            s.saveScheduled = true
            return true
        }
        if schedule { executor.after(Self.writeBehind) { [weak self] in self?.save() } }
    }

    /// Saves what changed since the last save (the store's flush).
    func save() {
        guard let (snapshot, generation, storage, checked) = state.withLock({ s -> (Replica, Int, ReplicaStorage, String)? in
            s.saveScheduled = false
            guard !s.dead, s.generation != s.savedGeneration else { return nil }
            return (s.synced.replica, s.generation, s.storage, s.checked)
        }) else { return }
        do {
            try storage.save(snapshot)
            state.withLock { s in
                s.savedGeneration = max(s.savedGeneration, generation)
                s.savedVector = snapshot.vector
            }
            trace.log("d\(device) \(storeIdentifier) saved \(snapshot.entries.count) entries")
            checker.saved(snapshot, device: device, store: checked)
        } catch {
            trace.log("d\(device) \(storeIdentifier) save failed: \(error.reason)")
        }
    }

    // MARK: Account switches

    /// Switches the store to another account's replica, `opened` from that account's file
    /// (`storage`), through the product's decision (`AccountSwitch.replace`, as
    /// `StoreSync.switchAccount` makes it), and posts what it says to the app. Its sync must be
    /// stopped and what it held saved (the product's switch does both first). `checkedAs`: the
    /// store's name to the checker on that account. Not from signed out: nothing is merged.
    func switchAccount(to storage: ReplicaStorage, opened: Replica, device identity: Data, checkedAs: String, logger: Logger) {
        let from = checked
        // The other account's file holds what it last saved there (durability), and the model's
        // views of the two accounts tell what the app is owed.
        checker.loaded(opened, device: device, store: checkedAs)
        let owed = AccountChecks.changedKeys(checker.accounts.modelVisible(device: device, store: from), checker.accounts.modelVisible(device: device, store: checkedAs))
        let event = state.withLock { s -> ChangeEvent? in
            let event = AccountSwitch.replace(&s.synced, with: opened, signingIn: plant == .switchMerges, discardSignedOutWrites: false,
                                              device: identity, wall: wall, logger: logger)
            s.storage = storage
            s.savedVector = opened.vector
            s.checked = checkedAs
            checker.acknowledged(device: device, store: storeIdentifier, wall: 0)
            // As the product: the new file holds what the switch made only once saved.
            s.generation += 1
            return event
        }
        trace.log("d\(device) \(storeIdentifier) \(checkedAs == storeIdentifier ? "back on the household's account" : "on the other account"): \(opened.entries.count) entries, \(event?.keys.count ?? 0) keys changed")
        if checkedAs == storeIdentifier { checker.accounts.checkHousehold(replica.entries.values, device: device, store: storeIdentifier, when: "after switching back") }
        if !owed.isEmpty { app?.owe(.accountChange(owed)) }
        if let event, plant != .silentSwitch { app?.fanOut.post(event) }
        scheduleSave()
    }

    /// The device lost power: this replica is gone with its memory.
    func crash() {
        state.withLock { $0.dead = true }
        app?.close()
    }

    private var isDead: Bool { state.withLock { $0.dead } }

    // MARK: SyncReplica

    func wallMilliseconds() -> UInt64 { wall() }

    var syncVector: VersionVector { state.withLock { $0.synced.vector } }

    var durableVector: VersionVector { state.withLock { $0.savedVector } }

    func syncDelta(for peer: VersionVector) -> (entries: [Entry], vector: VersionVector) {
        state.withLock { ($0.synced.delta(for: peer), $0.synced.vector) }
    }

    func unsignedEntries() -> [Entry] { state.withLock { $0.synced.unsignedEntries() } }

    func attachSignatures(_ signed: [Entry]) {
        state.withLock { s in
            guard !s.dead else { return }
            s.synced.attachSignatures(signed)
            s.generation += 1
        }
        scheduleSave()
    }

    func winningEntries(_ entries: [Entry]) -> [Entry] { state.withLock { $0.synced.winningEntries(entries) } }

    func applyRemote(_ entries: [Entry], heldBack: [Entry], reason: ChangeReason) -> (changed: [StoreKey], refused: [RefusedEntry]) {
        let now = wall()
        guard let (result, before, replica, held) = state.withLock({ s -> ((changed: [StoreKey], refused: [RefusedEntry]), VersionVector, Replica, Int)? in
            guard !s.dead else { return nil }
            let before = s.synced.vector
            let given = plant == .dropRemoteDeletes ? entries.filter { !$0.isTombstone } : entries
            let result = s.synced.applyRemote(given, heldBack: heldBack, wall: now)
            s.generation += 1
            return (result, before, s.synced.replica, s.synced.heldBack.count)
        }) else { return ([], []) }
        trace.log("d\(device) \(storeIdentifier) applied \(entries.count) entries, \(result.changed.count) changed, \(result.refused.count) refused, \(heldBack.count) held back")
        let accepted = entries.filter { entry in !result.refused.contains { $0.refers(to: entry) } }
        // What the model shows of the keys before and after: the app is owed their change.
        let keys = Set(accepted.map(\.key))
        let shown = { [checker, device, storeIdentifier] in checker.accounts.modelVisible(device: device, store: storeIdentifier).filter { keys.contains($0.key) } }
        let shownBefore = app == nil ? [:] : shown()
        checker.applied(accepted, device: device, store: storeIdentifier, now: entry(forKey:))
        if let app {
            checker.accounts.checkHousehold(accepted, device: device, store: storeIdentifier, when: "from a peer")
            let owed = AccountChecks.changedKeys(shownBefore, shown())
            if !owed.isEmpty { app.owe(.remote(owed)) }
            // As the store backend posts it (StoreBackend.applyRemote).
            if !result.changed.isEmpty { app.fanOut.post(ChangeEvent(reason: reason, keys: result.changed.map(\.string))) }
        }
        checker.covered(before: before, after: replica.vector, device: device, store: storeIdentifier)
        for detail in ReplicaBounds.broken(replica, held: held) { checker.fail("bounds", "d\(device) \(storeIdentifier): \(detail)") }
        scheduleSave()
        return result
    }

    func entry(forKey key: StoreKey) -> Entry? { state.withLock { $0.synced.entries[key] } }

    /// A removed device's later writes, which this store took before it knew of the removal
    /// (the engine calls it as it learns the record, and as it attaches the store).
    func dropEntries(signedBy device: Data, stampedAfter removedAt: UInt64) -> Int {
        let dropped = state.withLock { s -> [Entry] in
            guard !s.dead else { return [] }
            let dropped = s.synced.dropEntries(signedBy: device, stampedAfter: removedAt)
            if !dropped.isEmpty { s.generation += 1 }
            return dropped
        }
        if !dropped.isEmpty {
            trace.log("d\(self.device) \(storeIdentifier) dropped \(dropped.count) entries of a removed device")
            checker.dropped(dropped, device: self.device, store: storeIdentifier, now: entry(forKey:))
            scheduleSave()
        }
        return dropped.count
    }

    func imposedLead(forKey key: StoreKey, origin: ReplicaID, sequence: UInt64) -> Replica.ImposedLead? {
        state.withLock { $0.synced.imposedLead(forKey: key, origin: origin, sequence: sequence) }
    }

    func restampIfNeeded() -> Bool {
        let now = wall()
        let (keys, handler) = state.withLock { s -> ([StoreKey], (@Sendable () -> Void)?) in
            guard !s.dead else { return ([], nil) }
            let keys = s.synced.restampFutureEntries(wall: now)
            if !keys.isEmpty { s.generation += 1 }
            return (keys, keys.isEmpty ? nil : s.handler)
        }
        guard !keys.isEmpty else { return false }
        restamped(keys)
        handler?()
        scheduleSave()
        return true
    }

    var signerCertificates: [Data: Data] { state.withLock { $0.synced.certificates } }
    func keepCertificate(_ der: Data, signer: Data) { state.withLock { $0.synced.keepCertificate(der, signer: signer) } }

    var knownDevices: [DeviceID] { state.withLock { $0.synced.peerVectors.keys.compactMap(DeviceID.init(hex:)) } }
    func learnOfDevices(_ devices: [DeviceID]) { _ = state.withLock { $0.synced.learnOf(devices: devices.map(\.hex)) } }

    func forgetDevice(_ device: DeviceID) {
        let now = wall()
        noteCollection(scheduling: state.withLock { s -> (Bool, [Entry]) in
            guard !s.dead else { return (false, []) }
            let tombstones = s.synced.entries.values.filter(\.isTombstone)
            guard s.synced.forget(device: device.hex, wall: now) else { return (false, []) }
            s.generation += 1
            return (true, tombstones.filter { s.synced.entries[$0.key] == nil })
        })
    }

    func notePeer(_ device: DeviceID, acknowledged vector: VersionVector) {
        let now = wall()
        noteCollection(scheduling: state.withLock { s -> (Bool, [Entry]) in
            guard !s.dead else { return (false, []) }
            checker.acknowledged(device: self.device, store: storeIdentifier, wall: now)
            // The tombstones before, to tell the checker which went (the only places they go).
            let tombstones = s.synced.entries.values.filter(\.isTombstone)
            guard s.synced.notePeer(device.hex, acknowledged: vector, wall: now) else { return (false, []) }
            s.generation += 1
            return (true, tombstones.filter { s.synced.entries[$0.key] == nil })
        })
    }

    func collectReachedTombstones() {
        let now = wall()
        noteCollection(scheduling: state.withLock { s -> (Bool, [Entry]) in
            guard !s.dead, s.synced.tombstoneAwaitingClock != nil else { return (false, []) }
            let tombstones = s.synced.entries.values.filter(\.isTombstone)
            guard s.synced.collectReachedTombstones(wall: now) > 0 else { return (false, []) }
            s.generation += 1
            return (true, tombstones.filter { s.synced.entries[$0.key] == nil })
        })
    }

    /// Tells the checker which tombstones went, and saves if anything changed.
    private func noteCollection(scheduling outcome: (changed: Bool, collected: [Entry])) {
        if !outcome.collected.isEmpty {
            let count = outcome.collected.count
            trace.log("d\(self.device) \(storeIdentifier) collected \(count) tombstone\(count == 1 ? "" : "s")")
            checker.collected(outcome.collected, device: self.device, store: storeIdentifier)
        }
        if outcome.changed { scheduleSave() }
    }

    func onLocalChange(_ handler: @escaping @Sendable () -> Void) { state.withLock { $0.handler = handler } }
    var awaitingInitialSync: Bool { state.withLock { !$0.synced.hasSynced } }
    func initialSyncCompleted() { state.withLock { $0.synced.initialSyncCompleted() } }
    var wantsWhole: Bool { state.withLock { $0.synced.replica.wantsWhole } }
    func wholeReceived() { state.withLock { $0.synced.wholeReceived() } }
    func wantWhole() { state.withLock { $0.synced.wantWhole() } }
}
