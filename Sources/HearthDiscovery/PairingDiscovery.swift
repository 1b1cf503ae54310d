import HearthCore
import Logging

/// Pairing requests on the LAN through Avahi: a newcomer publishes its
/// ``PairingAnnouncement``, a member browses everyone's.
///
/// ```swift
/// // the newcomer
/// let announcer = PairingDiscovery(announcing: PairingAnnouncement(instanceName: "kitchen", port: port, keyHash: hash))
/// try await announcer.start()
/// // a member
/// let browser = PairingDiscovery.browsing()
/// try await browser.start()
/// for await case .appeared(let peer) in browser.events() {
///     guard let request = PairingAnnouncement(peer: peer) else { continue }
///     … dial peer.addresses / request.port …
/// }
/// ```
///
/// ``start()`` throws ``DiscoveryError/daemonUnavailable(_:)`` when no avahi-daemon runs: the
/// caller then pairs by address instead (`hearth device approve --address`).
package final class PairingDiscovery: PeerDiscovery {
    /// What this discovery publishes; nil for a member's browser.
    package let announcement: PairingAnnouncement?
    private let logger: Logger
    private let holder = AvahiSessionHolder()

    /// A newcomer's: publishes `announcement`, browses nothing.
    package init(announcing announcement: PairingAnnouncement, logger: Logger) {
        self.announcement = announcement
        self.logger = logger
    }

    private init(logger: Logger) {
        announcement = nil
        self.logger = logger
    }

    /// A member's: browses requests, publishes nothing.
    package static func browsing(logger: Logger) -> PairingDiscovery {
        PairingDiscovery(logger: logger)
    }

    /// Connects to avahi-daemon and publishes or browses.
    ///
    /// - Throws: ``DiscoveryError/daemonUnavailable(_:)``, ``DiscoveryError/invalidServiceDescription(_:)``,
    ///   ``DiscoveryError/alreadyStarted``.
    package func start() async throws {
        try announcement?.validate()
        try holder.start(requiringDaemon: true) { registry in
            try AvahiSession(service: PairingAnnouncement.spec(publishing: announcement), logger: logger,
                             registry: registry, staleGraceMilliseconds: 5000)
        }
    }

    /// Withdraws the request (or stops browsing) and finishes every event stream.
    package func stop() async { holder.stop() }

    /// Requests as they appear, change and go (a member's browser); replays those known.
    package func events() -> AsyncStream<PeerEvent> { holder.registry.subscribe() }

    /// The requests seen right now.
    package var peers: [DiscoveredPeer] { holder.registry.peers }

    /// The name the request is published under once the daemon confirmed it; nil before.
    package var publishedName: String? { holder.session?.publishedName }
}
