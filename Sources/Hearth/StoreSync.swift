import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import Logging

/// What a sync engine is started with.
struct SyncParameters: Sendable {
    let identity: DeviceIdentity
    let settings: SyncSettings
}

/// Why a store does not sync, while it does not (``StoreSync/notSyncing``): what the daemon
/// and `hearth serve` say of a store they hold, "signed out" being only one of the reasons.
package enum NotSyncingReason: Sendable, Equatable, CustomStringConvertible {
    /// No account to sync as (the default until a start).
    case signedOut
    /// The app stopped it (`stopSync()`) or opened the store with sync paused.
    case paused
    /// Sync was asked to start and could not: why (no device, the engine failed, or a store of
    /// this identifier syncs as this device already from another data directory).
    case cannotStart(String)

    package var description: String {
        switch self {
        case .signedOut: "not syncing (signed out)"
        case .paused: "not syncing (paused by the app)"
        case .cannotStart(let why): "not syncing: cannot start sync: \(why)"
        }
    }
}

/// This store on a running sync engine (shared with the device's other stores of the same
/// identity and settings) and what it needs to be stopped.
struct SyncRun: Sendable {
    let lease: DeviceEngines.Lease
    let store: SyncStore
}

/// A store's sync lifecycle: its run on its device's sync engine, started, stopped and
/// started again, and the account it follows (StoreSync+Account.swift), whose switch stops
/// and restarts it. The store (``StoreBackend``) is the engine's replica; this owns the run
/// and the account watch, behind a lock of its own, never taken while the store's is held
/// nor holding it.
final class StoreSync: Sendable {
    struct State {
        var run: SyncRun?
        /// What sync was started with, to start it again after ``stop()``.
        var parameters: SyncParameters?
        /// The account directory watched and this store's subscription (``watchAccount(settings:)``).
        var accountWatch: (watcher: AccountDirectoryWatcher, directory: String, token: UInt64)?
        /// The store whose account is followed; weak: the store owns this.
        weak var backend: StoreBackend?
        /// The device whose table holds the store: its engines sync it, its watcher follows the
        /// account directory. Nil for a memory-only store and a device daemon's memory copies.
        var owner: HearthDevice?
        /// Why it does not sync, meaningful while `run` is nil.
        var notSyncing = NotSyncingReason.signedOut
    }

    let state = Locked(State())
    let storeIdentifier: String
    let logger: Logger
    /// Signalled when this store starts or stops syncing (``engine`` changes): a task
    /// waiting for peers (`waitUntilSynced`) then follows the new engine's changes.
    let changes = ChangeSignal()

    init(storeIdentifier: String, logger: Logger) {
        self.storeIdentifier = storeIdentifier
        self.logger = logger
    }

    /// Set once by the store's init, before anything else can reach either.
    func bind(_ backend: StoreBackend) { state.withLock { $0.backend = backend } }
    var backend: StoreBackend? { state.withLock { $0.backend } }

    /// This store on its sync engine, while it syncs.
    var engine: SyncStore? { state.withLock { $0.run?.store } }

    /// Why this store does not sync; nil while it does.
    var notSyncing: NotSyncingReason? { state.withLock { $0.run == nil ? $0.notSyncing : nil } }

    /// The device the store belongs to (set by its device's table when it opens the store).
    var owner: HearthDevice? {
        get { state.withLock { $0.owner } }
        set { state.withLock { $0.owner = newValue } }
    }

    /// Starts syncing `replica` as `identity`, on its device's engine for that identity
    /// and `settings` (started if this is its first store); does nothing if this store syncs
    /// already.
    func start(_ replica: StoreBackend, identity: DeviceIdentity, settings: SyncSettings) {
        guard let engines = owner?.engines else {
            failedToStart("the store belongs to no device")
            return
        }
        let lease: DeviceEngines.Lease
        let store: SyncStore
        do {
            lease = try engines.acquire(identity: identity, settings: settings, logger: logger)
        } catch {
            failedToStart("\(error)")
            return
        }
        do {
            store = try lease.engine.attach(replica)
        } catch {
            // Attached already: a store of this identifier in another data directory syncs as
            // this device already (or a concurrent start of this one won).
            failedToStart("\(error)", level: .warning)
            Task { await lease.release() }
            return
        }
        // Checked and recorded in one step, so two concurrent starts cannot both sync it.
        let kept = state.withLock { s -> Bool in
            guard s.run == nil else { return false }
            s.run = SyncRun(lease: lease, store: store)
            s.parameters = SyncParameters(identity: identity, settings: settings)
            s.notSyncing = .signedOut   // for after a stop that does not say why
            return true
        }
        if !kept {
            lease.engine.detach(storeIdentifier: storeIdentifier)
            Task { await lease.release() }
        } else {
            replica.state.withLock { $0.refuseWritesBeforeInitialSync = settings.discardWritesBeforeInitialSync }
            changes.signal()
        }
    }

    /// Logs why sync did not start and keeps it for ``notSyncing`` (unless a concurrent start won).
    private func failedToStart(_ why: String, level: Logger.Level = .error) {
        logger.log(level: level, "cannot start sync: \(why)", metadata: ["store": "\(storeIdentifier)"])
        state.withLock { s in if s.run == nil { s.notSyncing = .cannotStart(why) } }
    }

    /// Records how to sync without starting: ``restart(_:)`` starts it (for
    /// ``StoreConfiguration/syncStartsPaused``).
    func prepare(identity: DeviceIdentity, settings: SyncSettings) {
        state.withLock { s in
            if s.parameters == nil { s.parameters = SyncParameters(identity: identity, settings: settings) }
            if s.run == nil { s.notSyncing = .paused }
        }
    }

    /// Starts sync again with the parameters of the last start (or of ``prepare(identity:settings:)``);
    /// false if there are none, or it runs already.
    func restart(_ replica: StoreBackend) -> Bool {
        guard let parameters = state.withLock({ $0.run == nil ? $0.parameters : nil }) else { return false }
        start(replica, identity: parameters.identity, settings: parameters.settings)
        return true
    }

    /// The port the engine listens on once started (nil if this store does not sync).
    func waitForStart() async throws -> Int? {
        guard let run = state.withLock({ $0.run }) else { return nil }
        return try await run.lease.started.value
    }

    /// Stops syncing this store: a barrier (once it returns no session changes the replica);
    /// the engine stops with the last of its stores. `reason`: what ``notSyncing`` says from now.
    func stop(reason: NotSyncingReason = .paused) async {
        guard let run = state.withLock({ s -> SyncRun? in
            defer { s.run = nil }
            s.notSyncing = reason
            return s.run
        }) else { return }
        changes.signal()
        run.lease.engine.detach(storeIdentifier: storeIdentifier)
        await run.lease.release()
    }
}
