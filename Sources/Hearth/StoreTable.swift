import Dispatch
import Logging
import Foundation
import HearthCore
import HearthIdentity
import NIOCore
import NIOPosix

/// One device's stores: one ``StoreBackend`` per store of its data directory, so that every
/// instance opened on the same identifier sees the same data (the file lock would refuse a
/// second one anyway). Owned by a ``HearthDevice``; two devices share none of it. The static
/// members below are how a store is opened (its file, or attached to the process that holds
/// it): they keep no state.
final class StoreTable: Sendable {
    /// One store's place in the table. Opening a store reads and decodes its file, so it
    /// happens under this slot's own lock: two opens of the same store wait for each other (the
    /// second must get the first's backend), opens of different stores do not.
    private final class Slot: Sendable {
        let backend = Locked<WeakBackend>(WeakBackend())
    }

    private struct WeakBackend {
        weak var backend: StoreBackend?
        /// The ``StoreRelease`` of that backend and of earlier ones whose deinit may still be
        /// putting out their last writes on another thread: kept after a backend is gone, so
        /// that ``flushAll()`` (at exit) and the device's stop can wait for them (finished ones
        /// leave at the next open).
        var releases: [StoreRelease] = []
    }

    private let slots = Locked<[String: Slot]>([:])

    /// The backend of `storeIdentifier` on `device`, opened (and its sync and account watch
    /// started, as `configuration` says) if it is not open yet.
    func backend(storeIdentifier: String, configuration: UbiquitousKeyValueStore.Configuration,
                 device: HearthDevice) throws(KeyValueStoreError) -> StoreBackend {
        guard !storeIdentifier.isEmpty else { return Self.memoryBackend(storeIdentifier: storeIdentifier, configuration: configuration) }
        let identity = Self.signedInIdentity(configuration)
        let location = StoreLocation(dataDirectory: configuration.dataDirectory, storeIdentifier: storeIdentifier,
                                     account: identity?.account.id.hex)
        // Keyed by store, not by file: the file changes when the account does.
        let slot = slots.withLock { table in
            if let slot = table[storeIdentifier] { return slot }
            let slot = Slot()
            table[storeIdentifier] = slot
            return slot
        }
        return try slot.backend.withLock { (entry) throws(KeyValueStoreError) -> StoreBackend in
            if let existing = entry.backend { return existing }
            let backend = try Self.openOrAttach(location, identity: identity, configuration: configuration, device: device)
            // Before anything starts: sync, the account watch and a later take-over use the device's parts.
            backend.sync.owner = device
            entry.backend = backend
            entry.releases.removeAll { $0.isFinished }
            entry.releases.append(backend.release)
            guard backend.isPersistent else { return backend }   // attached: the host syncs
            // Written while this device's clock was ahead, and it is right now: re-stamp before syncing.
            backend.restampIfNeeded()
            if device.disk.isSharedWithOtherProcesses { backend.startHosting(on: device.eventLoopGroup) }
            if configuration.sync.isEnabled {
                if let identity {
                    if configuration.syncStartsPaused {
                        backend.prepareSync(identity: identity, settings: configuration.sync)
                    } else {
                        backend.startSync(identity: identity, settings: configuration.sync)
                    }
                }
                backend.watchAccount(settings: configuration.sync)
            }
            return backend
        }
    }

    /// How long an open waits for a store another process holds: to attach to it, or for its
    /// lock should that process be exiting (docs/local-attach.md).
    static let attachTimeout: DispatchTimeInterval = .seconds(10)

    /// How soon an open asks a host again that took its connection but did not serve it
    /// (``ErrorCode/notServed``): nothing the watch sees announces when that host can.
    static let unservedRecheck: DispatchTimeInterval = .milliseconds(250)

    /// Opens the store's file; if another process holds it and `configuration.attach` allows,
    /// attaches to that process instead. Tries both again (a host may be starting or exiting)
    /// whenever the holder's socket or lock changes (``HolderWatch``: an event, not a sleep),
    /// for up to ``attachTimeout``, then throws `storeLocked` with why attaching failed. On a
    /// disk no other process sees, only the file: no daemon, no other process to attach to.
    private static func openOrAttach(_ location: StoreLocation, identity: DeviceIdentity?,
                                     configuration: UbiquitousKeyValueStore.Configuration,
                                     device: HearthDevice) throws(KeyValueStoreError) -> StoreBackend {
        guard device.disk.isSharedWithOtherProcesses else {
            return try open(location, identity: identity, configuration: configuration, device: device)
        }
        switch configuration.attach {
        case .automatic:
            _ = DaemonHoldRequest.ask(storeIdentifier: location.storeIdentifier, dataDirectory: location.dataDirectory)
        case .required:
            return try attachToDaemon(location, configuration: configuration, group: device.eventLoopGroup)
        case .embedded:
            break
        }
        let deadline = DispatchTime.now() + attachTimeout
        let socketPath = LocalSocketDirectory.socketPath(dataDirectory: configuration.dataDirectory, storeIdentifier: location.storeIdentifier)
        let group = device.eventLoopGroup
        var watch: HolderWatch?
        var locked: KeyValueStoreError?
        while true {
            // Not while the lock is known to be held: a failed open closes the lock file, which
            // would wake the watch (and every other waiter) at once, again and again.
            if watch?.lockIsHeld != true {
                do {
                    return try open(location, identity: identity, configuration: configuration, device: device)
                } catch where error.code == .storeLocked && configuration.attach == .automatic {
                    locked = error
                }
            }
            let failure: LocalAttachError
            do {
                return try StoreBackend.attach(storeIdentifier: location.storeIdentifier, location: location, configuration: configuration,
                                               group: group, deadline: min(deadline, .now() + .seconds(5)))
            } catch {
                failure = error
            }
            guard DispatchTime.now() < deadline else {
                let reason = locked?.reason ?? "the store is locked by another process"
                throw KeyValueStoreError(code: .storeLocked, key: nil, reason: "\(reason); attaching to it failed: \(failure)")
            }
            guard let watch else {
                // Rare (a host starting or exiting): watched from now on, and tried once more
                // before the first wait, so that a change since the tries above is not missed.
                watch = HolderWatch(socketPath: socketPath, lockPath: location.lockPath)
                continue
            }
            // A host that took the connection and dropped it (or was slow to answer) stays as
            // it is: no event comes, so it is asked again soon instead of at the deadline.
            watch.wait(until: deadline, recheckWithin: failure.code == .notServed ? unservedRecheck : nil)
        }
    }

    /// ``AttachMode/required``: the daemon holds the store (asked now) and this process attaches
    /// to it, trying again whenever the store's socket changes (the daemon may be opening it),
    /// for ``attachTimeout``; never the file itself. The connection runs on `group`, the device's.
    private static func attachToDaemon(_ location: StoreLocation, configuration: UbiquitousKeyValueStore.Configuration,
                                       group: any EventLoopGroup) throws(KeyValueStoreError) -> StoreBackend {
        guard DaemonHoldRequest.ask(storeIdentifier: location.storeIdentifier, dataDirectory: location.dataDirectory) else {
            throw KeyValueStoreError(code: .daemonUnavailable, key: nil,
                                     reason: "no Hearth daemon runs for this user, or it does not hold stores of \(location.dataDirectory) (attach mode .required; start it with hearth daemon)")
        }
        let deadline = DispatchTime.now() + attachTimeout
        let socketPath = LocalSocketDirectory.socketPath(dataDirectory: configuration.dataDirectory, storeIdentifier: location.storeIdentifier)
        var watch: HolderWatch?
        while true {
            do {
                return try StoreBackend.attach(storeIdentifier: location.storeIdentifier, location: location, configuration: configuration,
                                               group: group, deadline: min(deadline, .now() + .seconds(5)))
            } catch {
                guard DispatchTime.now() < deadline else {
                    throw KeyValueStoreError(code: .daemonUnavailable, key: nil, reason: "the Hearth daemon holds the store but attaching to it failed: \(error)")
                }
            }
            guard let watch else {
                watch = HolderWatch(socketPath: socketPath, lockPath: nil)
                continue
            }
            watch.wait(until: deadline)
        }
    }

    /// The device identity of the signed-in account, if syncing is enabled and someone is
    /// signed in. Problems with the account files are logged; the store then works locally.
    static func signedInIdentity(_ configuration: UbiquitousKeyValueStore.Configuration) -> DeviceIdentity? {
        guard configuration.sync.isEnabled else { return nil }
        let logger = configuration.logger
        let accounts = configuration.sync.accountDirectory.map { AccountStore(directory: URL(fileURLWithPath: $0), logger: logger) }
            ?? AccountStore(logger: logger)
        do {
            return try accounts.loadCurrentIdentity()
        } catch {
            configuration.logger.error("cannot load the signed-in account; the store stays local: \(error)")
            return nil
        }
    }

    static func memoryBackend(storeIdentifier: String, configuration: UbiquitousKeyValueStore.Configuration) -> StoreBackend {
        StoreBackend(storeIdentifier: storeIdentifier, storage: nil, replica: Replica(),
                     logger: configuration.logger, writeBehindDelay: configuration.writeBehindDelay, wall: configuration.wallClock)
    }

    /// Opens the store's file on `owner`'s disk, its delayed saves on `owner`'s scheduler.
    private static func open(_ location: StoreLocation, identity: DeviceIdentity?, configuration: UbiquitousKeyValueStore.Configuration,
                             device owner: HearthDevice) throws(KeyValueStoreError) -> StoreBackend {
        let device = identity?.deviceID.data
        do {
            let wall = configuration.wallClock
            let (storage, replica) = try ReplicaStorage.open(location, on: owner.disk, device: device, logger: configuration.logger,
                                                             wall: wall, random: configuration.randomBits)
            let backend = StoreBackend(storeIdentifier: location.storeIdentifier, storage: storage, replica: replica,
                                       logger: configuration.logger, writeBehindDelay: configuration.writeBehindDelay,
                                       wall: wall, dataDirectory: configuration.dataDirectory, saveScheduler: owner.saveScheduler)
            backend.state.withLock { $0.device = device }
            return backend
        } catch {
            let code: KeyValueStoreError.Code = error.code == .locked ? .storeLocked : .persistenceFailed
            throw KeyValueStoreError(code: code, key: nil, reason: error.description, underlying: error)
        }
    }

    /// Drops `backend` from the table (after ``StoreBackend/close()``).
    func forget(_ backend: StoreBackend) {
        for slot in slots.withLock({ Array($0.values) }) {
            slot.backend.withLock { entry in
                if entry.backend === backend {
                    entry.backend = nil
                    entry.releases.removeAll { $0 === backend.release }
                }
            }
        }
    }

    /// The stores open now (the device's stop closes them).
    var openBackends: [StoreBackend] {
        slots.withLock { Array($0.values) }.compactMap { slot in slot.backend.withLock { $0.backend } }
    }

    /// The releases of stores let go of whose deinit has not finished putting out their writes.
    var pendingReleases: [StoreRelease] {
        slots.withLock { Array($0.values) }.flatMap { slot in
            slot.backend.withLock { entry in entry.releases.filter { !$0.isFinished && $0 !== entry.backend?.release } }
        }
    }

    /// The exit hook's work (``HearthDevice``'s default devices): saves every open store, or,
    /// attached, has the host save it; and waits (at most 2 s in all) for stores whose deinit is
    /// still putting their last writes out on another thread (``StoreRelease``). Never waits on
    /// an event loop: the writes leave there.
    func flushAll() {
        let entries = slots.withLock { Array($0.values) }.map { slot in slot.backend.withLock { ($0.backend, $0.releases) } }
        let deadline = DispatchTime.now() + .seconds(2)
        let mayWait = MultiThreadedEventLoopGroup.currentEventLoop == nil
        for (backend, releases) in entries {
            if let backend { _ = backend.flush() }
            for release in releases where mayWait && release !== backend?.release {
                if !release.wait(until: deadline) {
                    Logger(label: "hearth").warning("exiting 2 s after a released store began to put out its last writes; they may be lost")
                }
            }
        }
    }
}
