import Foundation
import Logging

/// The discovery the sync engine should use: Avahi when a daemon runs, plus the static peers
/// of `HEARTH_PEERS` or the peer file when there are any; only the static peers when no
/// daemon runs.
package enum DefaultDiscovery {
    /// Starts the default discovery for `service`.
    ///
    /// - Avahi running, no static peers configured: an ``AvahiDiscovery``.
    /// - Avahi running and static peers configured: a ``MergedDiscovery`` of both.
    /// - No daemon: the ``StaticDiscovery`` (empty if none is configured, so the store keeps
    ///   working locally), after logging why mDNS is unavailable.
    ///
    /// - Throws: errors other than ``DiscoveryError/daemonUnavailable(_:)``, e.g. an invalid
    ///   service description or a malformed `HEARTH_PEERS`.
    package static func start(
        service: ServiceDescription,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger
    ) async throws -> any PeerDiscovery {
        // Parse the static list first: a typo in HEARTH_PEERS should fail loudly either way.
        let configured = try StaticDiscovery.fromDefaultSources(environment: environment, logger: logger)
        let avahi = AvahiDiscovery(service: service, logger: logger)
        do {
            if let configured {
                let merged = MergedDiscovery([avahi, configured])
                try await merged.start()
                return merged
            }
            try await avahi.start()
            return avahi
        } catch let error as DiscoveryError where error.code == .daemonUnavailable {
            logger.warning("\(error.reason); using static peers only")
        }
        let fallback = configured ?? StaticDiscovery(endpoints: [], logger: logger)
        try await fallback.start()
        return fallback
    }
}
