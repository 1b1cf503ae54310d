import Foundation
import HearthCore
import HearthDiscovery
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

        init(identity: DeviceIdentity, settings: SyncSettings) {
            account = identity.account.id.hex
            device = identity.deviceID.hex
            listenHost = settings.listenHost
            port = settings.port
            discovery = String(reflecting: settings.discovery)
            heartbeatInterval = settings.heartbeatInterval
            timeout = settings.timeout
        }
    }

    /// One shared engine and its start (listener, then discovery).
    final class Lease: Sendable {
        let key: Key
        let engine: SyncEngine
        let started: Task<Int, any Error>
        /// The watch on the account's `removals` file (directory and token), if any.
        let removalsWatch: (directory: String, token: UInt64)?

        init(key: Key, engine: SyncEngine, started: Task<Int, any Error>, removalsWatch: (directory: String, token: UInt64)?) {
            self.key = key
            self.engine = engine
            self.started = started
            self.removalsWatch = removalsWatch
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
        // Built outside the lock (it reads the identity's certificate, the account's removals,
        // and sets up TLS).
        let accounts = AccountStore(directory: URL(fileURLWithPath: settings.accountDirectory ?? AccountStore.defaultDirectory().path), logger: logger)
        let removals = try accounts.removals(of: identity.account.id)
        let engine = try SyncEngine(identity: identity,
                                    options: .init(host: settings.listenHost, port: settings.port,
                                                   heartbeatInterval: settings.heartbeatInterval, timeout: settings.timeout),
                                    removals: removals, devices: try accounts.knownDevices(of: identity.account.id), logger: logger)
        let (lease, fresh) = engines.withLock { table -> (Lease, Bool) in
            // Another store may have made one meanwhile: use it, and drop ours unstarted.
            if let entry = table[key] {
                table[key]?.users += 1
                return (entry.lease, false)
            }
            let started = Task { () throws -> Int in
                do {
                    return try await Self.run(engine, identity: identity, settings: settings, logger: logger)
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    logger.error("sync could not start: \(error)")
                    throw error
                }
            }
            // `hearth device remove` and other processes write the file: honour what they add
            // at once (it is one inotify watch per account directory, shared with `current`'s).
            let directory = removals.file?.deletingLastPathComponent().path
            let token = directory.map { AccountDirectoryWatcher.shared.subscribe($0, file: "removals") { removals.reload() } }
            let lease = Lease(key: key, engine: engine, started: started,
                              removalsWatch: directory.flatMap { d in token.map { (d, $0) } })
            table[key] = (lease, 1)
            return (lease, true)
        }
        if !fresh { Task { await engine.stop() } }
        if fresh {
            // A renewed certificate is saved for the next start (and the other processes of the
            // user), off the engine's threads: it is an fsync.
            let accountID = identity.account.id
            engine.onCertificateRenewed = { renewed in
                DispatchQueue.global().async {
                    do { try accounts.replaceDeviceCertificate(renewed.certificate, of: accountID) } catch {
                        logger.error("could not save the renewed device certificate: \(error)")
                    }
                }
            }
        }
        // Written between the file's reading and the watch: read it once more.
        if fresh { removals.reload() }
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
        if let watch = lease.removalsWatch { AccountDirectoryWatcher.shared.unsubscribe(watch.directory, token: watch.token) }
        lease.started.cancel()
        await lease.engine.stop()
        _ = try? await lease.started.value   // a start still binding sees the stop and gives up
    }

    /// Starts the engine's listener, then the discovery the settings ask for: one service per
    /// engine, naming the device and account only.
    private static func run(_ engine: SyncEngine, identity: DeviceIdentity, settings: SyncSettings, logger: Logger) async throws -> Int {
        let port = try await engine.start()
        let discovery: (any PeerDiscovery)?
        switch settings.discovery {
        case .automatic:
            let service = ServiceDescription(
                instanceName: identity.deviceName, port: UInt16(port), protocolVersion: SyncMessage.protocolVersion,
                accountHash: identity.account.id.shortHash, storeHash: nil, deviceHash: identity.deviceID.shortHash)
            discovery = try await DefaultDiscovery.start(service: service, logger: logger)
        case .staticPeers(let peers):
            let list = StaticDiscovery(endpoints: try peers.map { try StaticDiscovery.Endpoint(parsing: $0) }, logger: logger)
            try await list.start()
            discovery = list
        case .none:
            discovery = nil
        }
        if let discovery { engine.follow(discovery) }
        return port
    }
}
