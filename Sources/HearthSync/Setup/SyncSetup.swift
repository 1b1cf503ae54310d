import Foundation
import HearthCore
import HearthDiscovery
import HearthIdentity
import Logging

/// How a device's sync is put together: the one place that does it, for apps' stores and the
/// device daemon (through Hearth's `HearthDevice`, which owns the engines) and the benchmarks alike.
///
/// ```swift
/// let setup = SyncSetup(accountDirectory: accounts, discovery: .automatic, options: .init(port: 7420))
/// let engine = try setup.makeEngine(identity: identity, accounts: deviceAccounts, logger: logger)
/// try engine.attach(replica)
/// let port = try await setup.start(engine)
/// ```
///
/// The engine it makes reads the account's device removals and known devices from the account
/// directory, follows the `removals` file as other processes write it (`hearth device remove`),
/// and saves this device's renewed certificate there.
package struct SyncSetup: Sendable {
    /// Where the engine finds its peers.
    package enum Discovery: Sendable, Hashable {
        /// mDNS through Avahi, publishing this device (``SyncSetup/serviceDescription(of:port:)``);
        /// static peers from `HEARTH_PEERS` or the peers file where no Avahi daemon runs.
        case automatic
        /// These `host:port` peers only.
        case staticPeers([String])
        /// None: peers dial this device, or are added with ``SyncEngine/addPeer(host:port:)``.
        case none
    }

    /// The account directory (`$XDG_CONFIG_HOME/hearth` when nil).
    package var accountDirectory: URL?
    package var discovery: Discovery
    package var options: SyncEngine.Options
    /// The clocks, randomness and network (the system's, TLS over TCP, unless a test gives its own).
    package var environment: SyncEnvironment

    package init(accountDirectory: URL? = nil, discovery: Discovery = .automatic, options: SyncEngine.Options = .init(),
                 environment: SyncEnvironment = .system) {
        self.accountDirectory = accountDirectory
        self.discovery = discovery
        self.options = options
        self.environment = environment
    }
}

extension SyncSetup {
    /// An engine for `identity` as this setup says, its account's removals and known devices read
    /// from the account directory through `accounts` (the device's: its ``AccountStore/records``
    /// are shared with its other engines, and its ``AccountStore/watcher`` follows the removals
    /// as other processes add some; without a watcher they are read once).
    package func makeEngine(identity: DeviceIdentity, accounts: AccountStore, logger: Logger) throws -> SyncEngine {
        let removals = try accounts.removals(of: identity.account.id)
        let engine = try SyncEngine(identity: identity, options: options, removals: removals,
                                    devices: try accounts.knownDevices(of: identity.account.id), environment: environment, logger: logger)
        // `hearth device remove` and other processes write the file: honour what they add at
        // once (one inotify watch per account directory, shared with the device's stores' `current`).
        if let watcher = accounts.watcher, let directory = removals.file?.deletingLastPathComponent().path {
            let token = watcher.subscribe(directory, file: "removals") { removals.reload() }
            engine.whenStopped { watcher.unsubscribe(directory, token: token) }
            // Written between the file's reading and the watch: read it once more.
            removals.reload()
        }
        // A renewed certificate is saved for the next start (and the user's other processes),
        // off the engine's threads: it is an fsync.
        let accountID = identity.account.id
        engine.onCertificateRenewed = { renewed in
            DispatchQueue.global().async {
                do { try accounts.replaceDeviceCertificate(renewed.certificate, of: accountID) } catch {
                    logger.error("could not save the renewed device certificate: \(error)")
                }
            }
        }
        return engine
    }

    /// Starts `engine` listening, then the discovery this setup names: one service per engine,
    /// naming the device and the account only. Returns the port peers connect to.
    package func start(_ engine: SyncEngine) async throws -> Int {
        let port = try await engine.start()
        let following: (any PeerDiscovery)?
        switch discovery {
        case .automatic:
            following = try await DefaultDiscovery.start(service: Self.serviceDescription(of: engine.identity, port: port), logger: engine.logger)
        case .staticPeers(let peers):
            let list = StaticDiscovery(endpoints: try peers.map { try StaticDiscovery.Endpoint(parsing: $0) }, logger: engine.logger)
            try await list.start()
            following = list
        case .none:
            following = nil
        }
        if let following { engine.follow(following) }
        return port
    }

    /// What a device publishes on mDNS: its name and a short hash of its ID, and its account's
    /// short hash; never a store (docs/discovery.md).
    package static func serviceDescription(of identity: DeviceIdentity, port: Int) -> ServiceDescription {
        ServiceDescription(instanceName: identity.deviceName, port: UInt16(port), protocolVersion: SyncMessage.protocolVersion,
                           accountHash: identity.account.id.shortHash, storeHash: nil, deviceHash: identity.deviceID.shortHash)
    }
}
