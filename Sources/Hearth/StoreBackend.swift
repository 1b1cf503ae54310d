import Dispatch
import Foundation
import HearthCore
import Logging

/// The shared state behind every ``UbiquitousKeyValueStore`` instance of one store file
/// in this process: the replica, write-behind persistence and change fan-out.
///
/// All mutable state sits in one lock (`Locked`); no user code and no I/O ever runs while it is
/// held, so any thread may call in, and observers may call the store back.
final class StoreBackend: Sendable {
    struct State: ~Copyable {
        var replica: Replica
        /// The file of the current account's (or the signed-out) replica.
        var storage: ReplicaStorage?
        /// Bumped by every change; compared with `savedGeneration` to know what is on disk.
        var generation: UInt64 = 0
        var flushScheduled = false
        var instances: [ObjectIdentifier: WeakStore] = [:]
        var streams: [UInt64: AsyncStream<ChangeEvent>.Continuation] = [:]
        var nextStreamID: UInt64 = 0
        /// Keys whose entry may still lack a signature (local writes): the signer looks only
        /// at these instead of scanning the store on every push.
        var unsignedKeys: Set<String> = []
        /// Called after each local change (the running sync engine's push).
        var localChangeHandler: (@Sendable () -> Void)?
        var sync: SyncRun?
        /// What sync was started with, to start it again after ``stopSync()``.
        var syncParameters: SyncParameters?
        var accountWatcher: Task<Void, Never>?
        /// Apple's strict mode: refuse writes until the first download from peers.
        var refuseWritesBeforeInitialSync = false
    }

    struct WeakStore {
        weak var store: UbiquitousKeyValueStore?
    }

    let storeIdentifier: String
    /// Whether the store has a file at all (memory-only stores never do).
    let isPersistent: Bool
    /// Where replica files live, for the account switches that change the file.
    let dataDirectory: String
    let logger: Logger
    let writeBehindDelay: Duration
    /// Added to the system clock: tests stand in for devices whose clocks are wrong.
    let clockSkewMilliseconds: Int64
    let state: Locked<State>
    /// Serialises saves; holds the generation known to be on disk.
    private let savedGeneration = Locked<UInt64>(0)
    private let ioQueue: DispatchQueue
    /// Delivers notifications in order, never on the writer's stack (as Apple's daemon does).
    private let notifyQueue: DispatchQueue

    init(storeIdentifier: String, storage: ReplicaStorage?, replica: Replica, logger: Logger, writeBehindDelay: Duration,
         clockSkew: Duration = .zero, dataDirectory: String = "") {
        isPersistent = storage != nil
        self.dataDirectory = dataDirectory
        clockSkewMilliseconds = clockSkew.nanoseconds / 1_000_000
        self.storeIdentifier = storeIdentifier
        self.logger = logger
        self.writeBehindDelay = writeBehindDelay
        var initial = State(replica: replica, storage: storage)
        initial.unsignedKeys = Set(replica.entries.values.filter { $0.signature == nil }.map(\.key))
        state = Locked(initial)
        ioQueue = DispatchQueue(label: "hearth.store.io.\(storeIdentifier)", qos: .utility)
        notifyQueue = DispatchQueue(label: "hearth.store.notify.\(storeIdentifier)")
    }

    deinit {
        // The last instance is gone: whatever is still only in memory goes to disk now.
        _ = flush()
    }

    func wallMilliseconds() -> UInt64 {
        UInt64(clamping: Int64(clamping: HybridLogicalClock.wallMilliseconds()) &+ clockSkewMilliseconds)
    }

    // MARK: Reading

    func value(forKey key: String) -> PropertyListValue? {
        state.withLock { $0.replica.value(forKey: key) }
    }

    var visibleValues: [String: PropertyListValue] {
        state.withLock { $0.replica.visibleValues }
    }

    var replica: Replica {
        state.withLock { $0.replica }
    }

    var usage: Replica.Usage {
        state.withLock { $0.replica.usage }
    }

    /// The current replica file's location; `nil` for a memory-only store.
    var location: StoreLocation? {
        state.withLock { $0.storage?.location }
    }

    // MARK: Writing

    /// Validates and applies one local write (`nil` deletes). The per-value checks run
    /// before the lock; the store-wide quotas inside it, against the current usage.
    func write(_ value: PropertyListValue?, forKey key: String) throws(KeyValueStoreError) {
        guard key.utf8.count <= StoreLimits.maximumKeyLength else { throw .keyTooLong(key) }
        if let value {
            let size = key.utf8.count + value.canonicalSize
            guard size <= StoreLimits.maximumValueSize else { throw .valueTooLarge(key, size: size) }
        }
        let (scheduleFlush, handler) = try state.withLock { (s) throws(KeyValueStoreError) -> (Bool, (@Sendable () -> Void)?) in
            if s.refuseWritesBeforeInitialSync, !s.replica.hasSynced, s.storage?.location.account != nil {
                throw .initialSyncPending(key)
            }
            if let value {
                let after = s.replica.usage(afterWriting: value, forKey: key)
                // A write that shrinks or keeps usage is always allowed, so a full store can be edited down.
                if after.keys > StoreLimits.maximumKeyCount && after.keys > s.replica.usage.keys { throw .tooManyKeys(key) }
                if after.bytes > StoreLimits.maximumTotalSize && after.bytes > s.replica.usage.bytes {
                    throw .storeFull(key, total: after.bytes)
                }
            }
            guard s.replica.write(value, forKey: key, wall: wallMilliseconds()) != nil else { return (false, nil) }
            s.unsignedKeys.insert(key)
            s.generation &+= 1
            guard !s.flushScheduled else { return (false, s.localChangeHandler) }
            s.flushScheduled = true
            return (true, s.localChangeHandler)
        }
        if scheduleFlush { scheduleWriteBehind() }
        handler?()
    }

    /// Merges a batch that came from elsewhere (peers) atomically, schedules it for disk,
    /// and posts one notification with exactly the keys whose visible value changed.
    @discardableResult
    func applyExternal(_ entries: [Entry], coveredBy vector: VersionVector?, reason: ChangeReason) -> [String] {
        let (changed, scheduleFlush) = state.withLock { s -> ([String], Bool) in
            let changed = s.replica.apply(entries, coveredBy: vector, wall: wallMilliseconds())
            s.generation &+= 1
            let schedule = !s.flushScheduled
            s.flushScheduled = true
            return (changed, schedule)
        }
        if scheduleFlush { scheduleWriteBehind() }
        if !changed.isEmpty { post(ChangeEvent(reason: reason, keys: changed)) }
        return changed
    }

    // MARK: Persistence

    /// Saves within `writeBehindDelay` of the first unsaved change.
    func scheduleWriteBehind() {
        guard isPersistent else { return }
        // Weak: a store the app has let go of is saved by its deinit instead.
        ioQueue.asyncAfter(deadline: .now() + .nanoseconds(Int(writeBehindDelay.nanoseconds))) { [weak self] in
            _ = self?.flush()
        }
    }

    /// Saves the replica if it changed since the last save. Returns whether the disk now
    /// holds every change made before the call.
    func flush() -> Bool {
        guard isPersistent else { return false }
        return savedGeneration.withLock { saved in
            let (snapshot, generation, storage) = state.withLock { s in
                s.flushScheduled = false
                return (s.replica, s.generation, s.storage)
            }
            guard generation != saved, let storage else { return true }
            do {
                try storage.save(snapshot)
                saved = generation
                return true
            } catch {
                logger.error("could not save the store", metadata: ["store": "\(storeIdentifier)", "error": "\(error)"])
                // Try again later rather than lose the change.
                state.withLock { $0.flushScheduled = true }
                ioQueue.asyncAfter(deadline: .now() + .seconds(5)) { [weak self] in _ = self?.flush() }
                return false
            }
        }
    }

    // MARK: Observers

    func register(_ store: UbiquitousKeyValueStore) {
        state.withLock { s in
            s.instances = s.instances.filter { $0.value.store != nil }
            s.instances[ObjectIdentifier(store)] = WeakStore(store: store)
        }
    }

    func makeStream() -> AsyncStream<ChangeEvent> {
        let (stream, continuation) = AsyncStream<ChangeEvent>.makeStream(bufferingPolicy: .unbounded)
        let id = state.withLock { s in
            s.nextStreamID += 1
            s.streams[s.nextStreamID] = continuation
            return s.nextStreamID
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Posts `didChangeExternallyNotification` for every live instance and yields the
    /// event to every `changes` sequence, asynchronously and in order.
    func post(_ event: ChangeEvent) {
        notifyQueue.async { [self] in deliver(event) }
    }

    private func deliver(_ event: ChangeEvent) {
        let (stores, streams) = state.withLock { s in
            (s.instances.values.compactMap(\.store), Array(s.streams.values))
        }
        let userInfo: [AnyHashable: Any] = [
            NSUbiquitousKeyValueStoreChangeReasonKey: event.reason.rawValue,
            NSUbiquitousKeyValueStoreChangedKeysKey: event.keys,
        ]
        for store in stores {
            NotificationCenter.default.post(name: UbiquitousKeyValueStore.didChangeExternallyNotification,
                                            object: store, userInfo: userInfo)
        }
        for continuation in streams { continuation.yield(event) }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
