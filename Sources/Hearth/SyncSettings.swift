import Foundation
import HearthSync

/// How a store syncs with the household's other devices.
///
/// By default (``automatic``) a store syncs whenever the user is signed in to an account
/// (`hearth account …`), finding peers with mDNS through the Avahi daemon, or, where no
/// daemon runs, from `HEARTH_PEERS` (`host:port,host:port`) or `$XDG_CONFIG_HOME/hearth/peers`.
///
/// ```swift
/// var configuration = UbiquitousKeyValueStore.Configuration()
/// configuration.sync = SyncSettings(discovery: .staticPeers(["192.168.1.20:7420"]), port: 7420)
/// ```
public struct SyncSettings: Sendable {
    /// How the store finds the account's other devices.
    public enum Discovery: Sendable, Equatable {
        /// mDNS through Avahi; static peers from the environment or config file if Avahi is absent.
        case automatic
        /// These `host:port` peers only.
        case staticPeers([String])
        /// No discovery: peers connect to us, or are added with ``UbiquitousKeyValueStore/addSyncPeer(host:port:)``.
        case none
    }

    /// Whether to sync at all (a signed-in account is needed too).
    public var isEnabled: Bool
    /// The account directory (default `$XDG_CONFIG_HOME/hearth`).
    public var accountDirectory: String?
    /// How peers are found (default ``Discovery/automatic``).
    public var discovery: Discovery
    /// Where the sync listener binds (default every interface).
    public var listenHost: String
    /// The port the sync listener binds (default 0: a free port).
    public var port: Int
    /// How long a link in use may go without a frame before it is pinged (one ping per
    /// connection, whatever the number of stores; it also tells peers what this device has).
    /// Default 30 s, at least 250 ms (peers read at most 10 heartbeats a second from one device).
    /// An idle link is pinged ever more rarely, up to 8 intervals apart
    /// (docs/protocol.md, "Heartbeats and timeouts").
    public var heartbeatInterval: Duration
    /// How long a silent link in use is kept before it is dropped and redialled: a peer whose
    /// process hangs is noticed within this plus a third of it (2 minutes by default; longer on
    /// an idle link, whose pings are sparse). A machine that vanishes is noticed by the kernel
    /// within 90 s, idle or busy.
    public var timeout: Duration
    /// Apple's strict behaviour: writes made while signed out are dropped at sign-in, and
    /// writes before the first download from the account's peers are refused (Apple's
    /// setters post `ChangeReason.initialSyncChange`; ``UbiquitousKeyValueStore/setValue(_:forKey:)``
    /// throws ``KeyValueStoreError/Code/initialSyncPending``). Off by default: Hearth keeps
    /// such writes and reconciles them by timestamp (offline first).
    public var discardWritesBeforeInitialSync = false
    /// How long before its certificate expires a device asks its peers for a renewed one, and
    /// how close to expiry a peer's certificate must be for this device (with the account CA
    /// unlocked) to renew it. Default 90 days. A window longer than a certificate's remaining
    /// life (device certificates last a year) brings it into its window now: that is how a
    /// renewal is made to happen on purpose (`hearth daemon --renewal-window 400`, docs/command.md).
    public var renewalWindow: Duration = SyncSettings.defaultRenewalWindow
    /// 90 days.
    public static let defaultRenewalWindow: Duration = .seconds(90 * 86_400)
    /// The engine's clocks, randomness and network: the system's and TLS over TCP, unless a test
    /// runs its devices on HearthTesting's in-memory network.
    package var environment: SyncEnvironment = .system

    /// Settings with these values; every one has a default.
    public init(isEnabled: Bool = true, accountDirectory: String? = nil, discovery: Discovery = .automatic,
                listenHost: String = "0.0.0.0", port: Int = 0,
                heartbeatInterval: Duration = .seconds(30), timeout: Duration = .seconds(90)) {
        self.heartbeatInterval = heartbeatInterval
        self.timeout = timeout
        self.isEnabled = isEnabled
        self.accountDirectory = accountDirectory
        self.discovery = discovery
        self.listenHost = listenHost
        self.port = port
    }

    /// Sync when signed in, discovering peers automatically.
    public static let automatic = SyncSettings()
    /// Never sync: the store is local only.
    public static let disabled = SyncSettings(isEnabled: false)
}

extension SyncSettings {
    /// These settings as HearthSync's composition root takes them.
    var setup: SyncSetup {
        let discovery: SyncSetup.Discovery
        switch self.discovery {
        case .automatic: discovery = .automatic
        case .staticPeers(let peers): discovery = .staticPeers(peers)
        case .none: discovery = .none
        }
        return SyncSetup(accountDirectory: accountDirectory.map { URL(fileURLWithPath: $0) }, discovery: discovery,
                         options: .init(host: listenHost, port: port, heartbeatInterval: heartbeatInterval, timeout: timeout,
                                        renewalWindow: renewalWindow),
                         environment: environment)
    }
}

extension StoreConfiguration {
    /// The wall clock (milliseconds since 1970) of stores opened with this configuration: the
    /// device's, as its sync engine reads it (``SyncSettings/environment``: the system's in the
    /// product, a test's or a simulator's otherwise), shifted by ``clockSkew``. Every stamp a
    /// store makes comes from here, so whoever makes the device controls all of its time.
    package var wallClock: @Sendable () -> UInt64 {
        let wall = sync.environment.clock.wallMilliseconds
        let skew = clockSkew.nanoseconds / 1_000_000
        return { UInt64(clamping: Int64(clamping: wall()) &+ skew) }
    }

    /// 64 random bits a call, from the device's source of randomness (``SyncSettings/environment``,
    /// the system's in the product): the replica IDs of the stores' runs, so that a simulated
    /// household is the same for the same seed.
    package var randomBits: @Sendable () -> UInt64 {
        let unit = sync.environment.random.unit
        // Two draws of 32 bits each: a draw in 0..<1 carries 53.
        return { UInt64(unit() * 0x1_0000_0000) << 32 | UInt64(unit() * 0x1_0000_0000) }
    }
}
