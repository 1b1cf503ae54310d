import HearthCore
import Logging

/// Publishes this device as `_hearth._tcp` through the system's Avahi daemon and browses for
/// the peers of the same account and store.
///
/// - Peers of other accounts or stores, our own service, and services with a malformed or
///   hostile TXT record are ignored (the latter with a warning in the log).
/// - A name collision makes Avahi pick an alternative name ("Laptop #2"), re-published at once.
/// - If avahi-daemon is not running at ``start()``, it throws
///   ``DiscoveryError/daemonUnavailable(_:)`` so the caller can fall back to ``StaticDiscovery``.
/// - If the daemon restarts later, the service is re-published and browsing resumes by itself;
///   peers the new daemon does not report again within ``Options/staleGracePeriod`` are gone.
package final class AvahiDiscovery: PeerDiscovery {
    /// Tuning knobs; the defaults suit a household LAN.
    package struct Options: Sendable, Hashable {
        /// After a daemon restart, how long a previously known peer may stay unseen before
        /// it is reported gone. Long enough for peers to re-announce themselves.
        package var staleGracePeriod: Duration
        /// When true (the default), ``AvahiDiscovery/start()`` throws
        /// ``DiscoveryError/daemonUnavailable(_:)`` if avahi-daemon is not running, so the caller
        /// can fall back. When false, it succeeds and publishes once the daemon appears (for
        /// apps started at boot before the daemon). A missing D-Bus always throws.
        package var requiresDaemonAtStart: Bool

        /// Options with the given values.
        package init(staleGracePeriod: Duration = .seconds(5), requiresDaemonAtStart: Bool = true) {
            self.staleGracePeriod = staleGracePeriod
            self.requiresDaemonAtStart = requiresDaemonAtStart
        }
    }

    /// What this device publishes.
    package let service: ServiceDescription
    private let options: Options
    private let logger: Logger
    private let holder = AvahiSessionHolder()

    /// A discovery for `service`; nothing happens until ``start()``.
    package init(service: ServiceDescription, options: Options = Options(),
                logger: Logger) {
        self.service = service
        self.options = options
        self.logger = logger
    }

    /// Connects to avahi-daemon, publishes the service and starts browsing.
    ///
    /// - Throws: ``DiscoveryError/daemonUnavailable(_:)`` when no daemon (or no system D-Bus)
    ///   is reachable; ``DiscoveryError/invalidServiceDescription(_:)``;
    ///   ``DiscoveryError/alreadyStarted``.
    package func start() async throws {
        try service.validate()
        let milliseconds = options.staleGracePeriod.components.seconds * 1000
            + options.staleGracePeriod.components.attoseconds / 1_000_000_000_000_000
        try holder.start(requiringDaemon: options.requiresDaemonAtStart) { registry in
            try AvahiSession(service: service.avahiSpec, logger: logger, registry: registry,
                             staleGraceMilliseconds: UInt32(clamping: max(0, milliseconds)))
        }
    }

    /// Withdraws the service, stops browsing and finishes every event stream.
    package func stop() async { holder.stop() }

    package func events() -> AsyncStream<PeerEvent> { holder.registry.subscribe() }

    package var peers: [DiscoveredPeer] { holder.registry.peers }

    /// The instance name the service is published under once the daemon confirmed it
    /// (it differs from ``ServiceDescription/instanceName`` after a collision); nil before.
    package var publishedName: String? { currentSession?.publishedName }

    /// Whether avahi-daemon is connected right now (false while it restarts).
    package var isConnected: Bool { currentSession?.isConnected ?? false }

    /// How many times the connection to avahi-daemon was re-established since ``start()``.
    package var reconnectCount: Int { currentSession?.reconnectCount ?? 0 }

    private var currentSession: AvahiSession? { holder.session }
}
