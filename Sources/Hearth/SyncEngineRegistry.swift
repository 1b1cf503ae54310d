import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import Logging

/// The sync engines of this process: the stores of one device identity with the same sync
/// settings share one engine (one listener, one mDNS service, one connection per peer
/// device), which stops when the last of them stops syncing.
final class SyncEngineRegistry: Sendable {
    static let shared = SyncEngineRegistry()

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

        init(key: Key, engine: SyncEngine, started: Task<Int, any Error>) {
            self.key = key
            self.engine = engine
            self.started = started
        }
    }

    private let engines = Locked<[Key: (lease: Lease, users: Int)]>([:])

    /// The engine for `identity` and `settings`, started if it is new; each call is paired
    /// with a ``release(_:)``.
    func acquire(identity: DeviceIdentity, settings: SyncSettings, logger: Logger) throws -> Lease {
        let key = Key(identity: identity, settings: settings)
        if let lease = engines.withLock({ table -> Lease? in
            guard let entry = table[key] else { return nil }
            table[key]?.users += 1
            return entry.lease
        }) {
            return lease
        }
        // Built outside the lock (it reads the account's removals and sets up TLS).
        let setup = settings.setup
        let engine = try SyncEngine(identity: identity, setup: setup, logger: logger)
        let (lease, fresh) = engines.withLock { table -> (Lease, Bool) in
            // Another store may have made one meanwhile: use it, and drop ours unstarted.
            if let entry = table[key] {
                table[key]?.users += 1
                return (entry.lease, false)
            }
            let started = Task { () throws -> Int in
                do {
                    return try await engine.start(discovering: setup.discovery)
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    logger.error("sync could not start: \(error)")
                    throw error
                }
            }
            let lease = Lease(key: key, engine: engine, started: started)
            table[key] = (lease, 1)
            return (lease, true)
        }
        if !fresh { Task { await engine.stop() } }
        return lease
    }

    /// Ends one use of `lease`; the last one stops the engine.
    func release(_ lease: Lease) async {
        let last = engines.withLock { table -> Bool in
            guard let entry = table[lease.key], entry.lease === lease else { return false }
            if entry.users > 1 {
                table[lease.key]?.users -= 1
                return false
            }
            table[lease.key] = nil
            return true
        }
        guard last else { return }
        lease.started.cancel()
        await lease.engine.stop()
        _ = try? await lease.started.value   // a start still binding sees the stop and gives up
    }
}
