import Dispatch
import Foundation
import HearthCore
import Logging
import NIOCore
import NIOPosix

/// The shared state behind every ``UbiquitousKeyValueStore`` instance of one store file
/// in this process: the replica under one lock.
/// The rest are types of their own, which it holds and forwards to: ``WriteBehind`` (its saves),
/// ``ChangeFanOut`` (who is
/// told of a change), ``StoreHost`` (hosting the store for attached processes),
/// ``AttachedStore`` (this process attached to another's store), ``StoreSync`` (the sync
/// engine's run and account switches).
///
/// Its mutable state sits in one lock (`Locked`); no user code and no I/O ever runs while it is
/// held, so any thread may call in, and observers may call the store back.
final class StoreBackend: Sendable {
    struct State: ~Copyable {
        /// The replica and every rule on what enters it (quotas, signer shares, held-back entries).
        var replica: SyncedReplica
        /// The file of the current account's (or the signed-out) replica.
        var storage: ReplicaStorage?
        /// Bumped by every change; compared with `savedGeneration` to know what is on disk.
        var generation: UInt64 = 0
        /// The vector of the replica as last saved to `storage` (its file's, when opened): what
        /// peers may collect tombstones on (``SyncReplica/durableVector``).
        var savedVector = VersionVector()
        var flushScheduled = false
        /// Called after each local change (the running sync engine's push).
        var localChangeHandler: (@Sendable () -> Void)?
        /// Apple's strict mode: refuse writes until the first download from peers.
        var refuseWritesBeforeInitialSync = false
        /// The signed-in device's ID (nil when signed out): attached processes write under
        /// origins bound to it.
        var device: Data?
        /// Hosting the store for other processes (docs/local-attach.md).
        var localHost: StoreHost?
        /// Per origin of an attached process, the highest sequence of its writes applied here
        /// (``StoreHost/apply(_:undecodable:to:)``): a save's snapshot of it, taken with the
        /// replica's, is what the host then reports durable.
        var attachedApplied: [ReplicaID: UInt64] = [:]
        /// Set when this process is attached to another that hosts the store: then `replica`
        /// is the in-process copy (the host's entries and this process's pending writes),
        /// kept by ``AttachedStore``.
        var attachment: Attachment?
    }

    let storeIdentifier: String
    /// Where replica files live, for the account switches that change the file.
    let dataDirectory: String
    let logger: Logger
    /// This store's wall clock in milliseconds since 1970: its configuration's
    /// (``StoreConfiguration/wallClock``), never read from the system here.
    let wall: @Sendable () -> UInt64
    let state: Locked<State>
    /// The store's saves: write-behind on its I/O queue, one at a time, retried (``WriteBehind``).
    let saves: WriteBehind
    /// The instances and `changes` sequences told of every change (``ChangeFanOut``).
    let fanOut: ChangeFanOut
    /// Finished when the deinit has put the last writes out; the exit hook waits for it.
    let release = StoreRelease()
    /// This store on the sync engine, and the account switches.
    let sync: StoreSync

    init(storeIdentifier: String, storage: ReplicaStorage?, replica: Replica, logger: Logger, writeBehindDelay: Duration,
         wall: @escaping @Sendable () -> UInt64, dataDirectory: String = "", saveScheduler: SaveScheduler? = nil) {
        self.dataDirectory = dataDirectory
        self.wall = wall
        self.storeIdentifier = storeIdentifier
        self.logger = logger
        var initial = State(replica: SyncedReplica(replica), storage: storage)
        // Opened from its file: what it holds is on disk.
        initial.savedVector = replica.vector
        state = Locked(initial)
        sync = StoreSync(storeIdentifier: storeIdentifier, logger: logger)
        saves = WriteBehind(storeIdentifier: storeIdentifier, delay: writeBehindDelay, scheduler: saveScheduler)
        fanOut = ChangeFanOut(storeIdentifier: storeIdentifier)
        sync.bind(self)
    }

    deinit {
        // The last instance is gone: whatever is still only in memory goes to disk now, or,
        // attached, to the host.
        if let attached = state.withLock({ $0.attachment?.store }) {
            attached.detach(fromDeinitOf: self)
        } else {
            _ = flush()
            release.finish()
        }
        stopHosting()
    }

    func wallMilliseconds() -> UInt64 { wall() }

    // MARK: Reading

    func value(forKey key: String) -> PropertyListValue? {
        let key = StoreKey(key)
        return state.withLock { $0.replica.value(forKey: key) }
    }

    /// Every visible key (exactly as written) and value.
    var visibleValues: [StoreKey: PropertyListValue] {
        state.withLock { $0.replica.visibleValues }
    }

    var replica: Replica {
        state.withLock { $0.replica.replica }
    }

    /// The replica with the entries it holds back, read at one moment (a divergence's dump).
    var replicaAndHeldBack: (replica: Replica, heldBack: [ReplicaID: Entry]) {
        state.withLock { ($0.replica.replica, $0.replica.heldBack) }
    }

    var usage: Replica.Usage {
        state.withLock { $0.replica.usage }
    }

    /// Whether this process owns a file of the store (memory-only and attached stores do not).
    var isPersistent: Bool {
        state.withLock { $0.storage != nil }
    }

    /// The current replica file's location (the host's, when attached); `nil` for a memory-only store.
    var location: StoreLocation? {
        state.withLock { $0.storage?.location ?? $0.attachment?.location }
    }

    // MARK: Writing

    /// Validates and applies one local write (`nil` deletes). The per-entry rules
    /// (`StoreLimits.check(key:value:)`) run before the lock; the store-wide ones
    /// (`SyncedReplica.admitLocalWrite`) inside it, against the current usage.
    func write(_ value: PropertyListValue?, forKey name: String) throws(KeyValueStoreError) {
        let key = StoreKey(name)
        let size: Int
        do {
            size = try StoreLimits.check(key: key, value: value)
        } catch {
            throw KeyValueStoreError(violation: error, key: name)
        }
        let wall = wallMilliseconds()
        let (scheduleFlush, handler, restamped, written, send) = try state.withLock { (s) throws(KeyValueStoreError) -> (Bool, (@Sendable () -> Void)?, [StoreKey], (Entry, StoreHost?)?, (@Sendable () -> Void)?) in
            let made: Entry?, restamped: [StoreKey]
            do throws(SyncedReplica.LocalRefusal) {
                // Attached: the host re-stamps what its own clock put ahead; this copy only follows.
                (made, restamped) = try s.replica.write(value, forKey: key, size: size, wall: wall, strict: isStrict(s),
                                                           restamp: s.attachment == nil)
            } catch {
                throw KeyValueStoreError(error, key: name)
            }
            guard let entry = made else {
                // Deleting an absent key changes nothing, but a re-stamp still needs saving and pushing.
                return restamped.isEmpty ? (false, nil, [], nil, nil) : (scheduleSave(&s), s.localChangeHandler, restamped, nil, nil)
            }
            if s.attachment != nil {
                // Queued under the lock, so that writes leave in sequence order; the loop woken after it.
                return (false, nil, [], nil, s.attachment!.enqueue(entry))
            }
            return (scheduleSave(&s), s.localChangeHandler, restamped, (entry, s.localHost), nil)
        }
        send?()
        if !restamped.isEmpty { logRestamp(restamped) }
        if scheduleFlush { scheduleWriteBehind() }
        handler?()
        // Attached processes see the host's own writes as another process's: serverChange.
        if let (entry, host) = written, let host { host.broadcast(.change(.serverChange, [entry])) }
    }

    /// Marks the state changed; returns whether a save must be scheduled (none is yet).
    func scheduleSave(_ s: inout State) -> Bool {
        s.generation &+= 1
        defer { s.flushScheduled = true }
        return !s.flushScheduled
    }

    /// Whether writes made on this device are refused until the first sync (Apple's strict
    /// mode, in an account; see `SyncedReplica.admitLocalWrite`).
    func isStrict(_ s: borrowing State) -> Bool {
        s.refuseWritesBeforeInitialSync && s.storage?.location.account != nil
    }

    func logRestamp(_ keys: [StoreKey]) {
        logger.warning("this device's clock was more than \(HybridLogicalClock.maximumDrift / 3_600_000) h ahead when \(keys.count) entries were written; peers refused them, so they are written again with the current time",
                       metadata: ["store": "\(storeIdentifier)", "keys": "\(keys.map(\.string))"])
    }

    /// Re-stamps what was written under a clock that was ahead (`SyncedReplica.restampFutureEntries(wall:)`),
    /// outside a write: at open, and on the sync engine's heartbeat. Returns whether any was.
    @discardableResult
    func restampIfNeeded() -> Bool {
        let wall = wallMilliseconds()
        let (restamped, schedule, handler) = state.withLock { s -> ([StoreKey], Bool, (@Sendable () -> Void)?) in
            let restamped = s.replica.restampFutureEntries(wall: wall)
            return restamped.isEmpty ? ([], false, nil) : (restamped, scheduleSave(&s), s.localChangeHandler)
        }
        guard !restamped.isEmpty else { return false }
        logRestamp(restamped)
        if schedule { scheduleWriteBehind() }
        handler?()
        return true
    }

    /// Merges a batch that came from elsewhere (peers) atomically, schedules it for disk,
    /// and posts one notification with exactly the keys whose visible value changed.
    @discardableResult
    func applyExternal(_ entries: [Entry], coveredBy vector: VersionVector?, reason: ChangeReason) -> [StoreKey] {
        let (changed, scheduleFlush) = state.withLock { s -> ([StoreKey], Bool) in
            let changed = s.replica.applyAdmitted(entries, coveredBy: vector, wall: wallMilliseconds())
            return (changed, scheduleSave(&s))
        }
        if scheduleFlush { scheduleWriteBehind() }
        if !changed.isEmpty { post(ChangeEvent(reason: reason, keys: changed.map(\.string))) }
        return changed
    }

    // MARK: Persistence (``WriteBehind``)

    /// ``flush()`` from an async context: the same, off the cooperative pool.
    @discardableResult
    func flushOffPool() async -> Bool {
        (try? await saves.onIOQueue { [self] in flush() }) ?? false
    }

    /// Saves within the write-behind delay of the first unsaved change.
    func scheduleWriteBehind() { saves.scheduleWriteBehind(of: self) }

    /// Saves the replica if it changed since the last save (``WriteBehind/save(_:)``). Returns
    /// whether the disk now holds every change made before the call.
    ///
    /// Attached to another process, it asks the host to save and waits until the host has this
    /// process's writes on disk (``AttachedStore/synchronize(timeout:)``).
    func flush() -> Bool {
        if let attached = state.withLock({ $0.attachment?.store }) {
            // Never wait on an event loop (a store released there, say): the answer comes on one.
            return MultiThreadedEventLoopGroup.currentEventLoop == nil && attached.synchronize()
        }
        return saves.save(self)
    }

    // MARK: Other processes (docs/local-attach.md)

    /// Opens the store attached to the process that hosts it (``AttachedStore``), its connection
    /// on `group` (its device's).
    static func attach(storeIdentifier: String, location: StoreLocation, configuration: UbiquitousKeyValueStore.Configuration,
                       group: any EventLoopGroup, deadline: DispatchTime) throws(LocalAttachError) -> StoreBackend {
        try AttachedStore.attach(storeIdentifier: storeIdentifier, location: location, configuration: configuration,
                                 group: group, deadline: deadline)
    }

    var isAttached: Bool { state.withLock { $0.attachment != nil } }

    /// Detaches for good (``AttachedStore/detach(synchronize:)``); returns whether it was attached.
    @discardableResult
    func detach(synchronize: Bool) -> Bool {
        guard let attached = state.withLock({ $0.attachment?.store }) else { return false }
        attached.detach(synchronize: synchronize)
        return true
    }

    /// Offers the store to other processes of this user (``StoreHost/offer(_:on:)``), its socket
    /// on `group` (its device's).
    func startHosting(on group: any EventLoopGroup) { StoreHost.offer(self, on: group) }

    /// Stops hosting: the attached processes take over or reattach.
    func stopHosting() {
        state.withLock { s in defer { s.localHost = nil }; return s.localHost }?.stop()
    }

    // MARK: Observers (``ChangeFanOut``)

    func register(_ store: UbiquitousKeyValueStore) { fanOut.register(store) }
    func unregister(_ store: UbiquitousKeyValueStore) { fanOut.unregister(store) }
    func makeStream() -> AsyncStream<ChangeEvent> { fanOut.makeStream() }

    /// Posts `didChangeExternallyNotification` for every live instance and yields the
    /// event to every `changes` sequence, asynchronously and in order; and sends the change to
    /// the attached processes (`entries`: the changed entries, when the caller has them).
    func post(_ event: ChangeEvent, entries: [Entry]? = nil) {
        postHere(event)
        state.withLock { $0.localHost }?.forward(event, entries: entries)
    }

    /// ``post(_:entries:)`` for this process only (an attached process's write: the host sends
    /// it to the other attached processes itself, not back to the writer).
    func postHere(_ event: ChangeEvent) { fanOut.post(event) }
}
