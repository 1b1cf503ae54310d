import Foundation
import Logging

/// The discovery the sync engine should use: Avahi when a daemon runs, otherwise the static
/// peers of `HEARTH_PEERS` or the peer file.
public enum DefaultDiscovery {
    /// Starts Avahi discovery, or falls back to ``StaticDiscovery`` when no daemon is
    /// reachable (logging why). With no daemon and no static peers the result is an empty
    /// static discovery, so the store keeps working locally.
    ///
    /// - Throws: errors other than ``DiscoveryError/daemonUnavailable(_:)``, e.g. an invalid
    ///   service description or a malformed `HEARTH_PEERS`.
    public static func start(
        service: ServiceDescription,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger = Logger(label: "hearth.discovery")
    ) async throws -> any PeerDiscovery {
        let avahi = AvahiDiscovery(service: service, logger: logger)
        do {
            try await avahi.start()
            return avahi
        } catch DiscoveryError.daemonUnavailable(let why) {
            logger.warning("mDNS discovery unavailable (\(why)); falling back to static peers")
        }
        let fallback = try StaticDiscovery.fromDefaultSources(environment: environment, logger: logger)
            ?? StaticDiscovery(endpoints: [], logger: logger)
        try await fallback.start()
        return fallback
    }
}
