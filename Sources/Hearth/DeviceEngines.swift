import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import HearthTransport
import Logging
import NIOCore

/// The sync engines of one device (``HearthDevice``): its stores of one identity with the same
/// sync settings share one engine (one listener, one mDNS service, one connection per peer
/// device), which stops when the last of them stops syncing, or when the device stops.
final class DeviceEngines: Sendable {
    /// What makes two stores able to share an engine.
    struct Key: Hashable, Sendable {
        let account: String
        let device: String
        let listenHost: String
        let port: Int
        let discovery: String
        let heartbeatInterval: Duration
        let timeout: Duration
        let renewalWindow: Duration

        init(identity: DeviceIdentity, settings: SyncSettings) {
            account = identity.account.id.hex
            device = identity.deviceID.hex
            listenHost = settings.listenHost
            port = settings.port
            discovery = String(reflecting: settings.discovery)
            heartbeatInterval = settings.heartbeatInterval
            timeout = settings.timeout
            renewalWindow = settings.renewalWindow
        }
    }

    /// One shared engine and its start (listener, then discovery).
    final class Lease: Sendable {
        let key: Key
        let engine: SyncEngine
        let started: Task<Int, any Error>
        /// The table it came from, which ``release()`` gives it back to.
        let engines: DeviceEngines

        init(key: Key, engine: SyncEngine, started: Task<Int, any Error>, engines: DeviceEngines) {
            self.key = key
            self.engine = engine
            self.started = started
            self.engines = engines
        }

        /// Ends this use of the engine; the last one stops it.
        func release() async { await engines.release(self) }
    }

    private struct State {
        var engines: [Key: (lease: Lease, users: Int)] = [:]
        /// Set by ``stopAll()``: no engine is made any more.
        var stopped = false
    }

    private let state = Locked(State())
    /// The device's records and watcher, which every engine reads its account's removals and
    /// known devices through (the account directory is each store's settings').
    private let records: HouseholdRecords
    private let watcher: AccountDirectoryWatcher
    /// The device's own event loop group, if it was given one: its engines' TLS connections run
    /// on it (``HearthDevice/init(_:disk:eventLoopGroup:saveScheduler:)``).
    private let eventLoopGroup: (any EventLoopGroup)?

    init(records: HouseholdRecords, watcher: AccountDirectoryWatcher, eventLoopGroup: (any EventLoopGroup)? = nil) {
        self.records = records
        self.watcher = watcher
        self.eventLoopGroup = eventLoopGroup
    }

    /// The engine for `identity` and `settings`, started if it is new; each call is paired
    /// with a ``Lease/release()``. Throws once the device has stopped.
    func acquire(identity: DeviceIdentity, settings: SyncSettings, logger: Logger) throws -> Lease {
        let key = Key(identity: identity, settings: settings)
        if let lease = try state.withLock({ s -> Lease? in
            guard !s.stopped else { throw KeyValueStoreError.deviceStopped }
            guard let entry = s.engines[key] else { return nil }
            s.engines[key]?.users += 1
            return entry.lease
        }) {
            return lease
        }
        // Built outside the lock (it reads the account's removals and sets up TLS).
        let setup = { [eventLoopGroup] in
            var setup = settings.setup
            if let eventLoopGroup { setup.environment.network = PeerTransport.network(on: eventLoopGroup) }
            return setup
        }()
        let accounts = AccountStore(directory: setup.accountDirectory ?? AccountStore.defaultDirectory(), logger: logger,
                                    records: records, watcher: watcher)
        let engine = try setup.makeEngine(identity: identity, accounts: accounts, logger: logger)
        let (lease, fresh) = state.withLock { s -> (Lease?, Bool) in
            guard !s.stopped else { return (nil, false) }
            // Another store may have made one meanwhile: use it, and drop ours unstarted.
            if let entry = s.engines[key] {
                s.engines[key]?.users += 1
                return (entry.lease, false)
            }
            let started = Task { () throws -> Int in
                do {
                    return try await setup.start(engine)
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    logger.error("sync could not start: \(error)")
                    throw error
                }
            }
            let lease = Lease(key: key, engine: engine, started: started, engines: self)
            s.engines[key] = (lease, 1)
            return (lease, true)
        }
        if !fresh { Task { await engine.stop() } }
        guard let lease else { throw KeyValueStoreError.deviceStopped }
        return lease
    }

    /// Ends one use of `lease`; the last one stops the engine.
    func release(_ lease: Lease) async {
        let last = state.withLock { s -> Bool in
            guard let entry = s.engines[lease.key], entry.lease === lease else { return false }
            if entry.users > 1 {
                s.engines[lease.key]?.users -= 1
                return false
            }
            s.engines[lease.key] = nil
            return true
        }
        guard last else { return }
        await Self.stop(lease)
    }

    /// Stops every engine, whoever still uses it, and makes no more: a barrier (once it returns,
    /// no engine of the device listens, dials or changes a replica). Later releases do nothing.
    func stopAll() async {
        let leases = state.withLock { s -> [Lease] in
            s.stopped = true
            defer { s.engines = [:] }
            return s.engines.values.map(\.lease)
        }
        for lease in leases { await Self.stop(lease) }
    }

    private static func stop(_ lease: Lease) async {
        lease.started.cancel()
        await lease.engine.stop()
        _ = try? await lease.started.value   // a start still binding sees the stop and gives up
    }

    /// How many engines run (tests).
    var count: Int { state.withLock { $0.engines.count } }
}
