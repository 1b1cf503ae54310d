/// Errors of the discovery layer.
package enum DiscoveryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No Avahi daemon (or no system D-Bus) is reachable. The engine should fall back to
    /// ``StaticDiscovery``. The string says what was tried and how to fix it.
    case daemonUnavailable(String)
    /// The service to publish would be rejected by peers (bad hash, port 0, …).
    case invalidServiceDescription(String)
    /// Avahi refused an operation; `code` is Avahi's error number.
    case avahiFailure(code: Int32, message: String)
    /// ``AvahiDiscovery/start()`` was called twice, or after ``AvahiDiscovery/stop()``.
    case alreadyStarted
    /// A static peer list has an entry that is not `host:port`.
    case invalidStaticPeer(entry: String, reason: String)
    /// A static peer config file could not be read.
    case unreadableConfigFile(path: String, reason: String)

    package var description: String {
        switch self {
        case .daemonUnavailable(let why): "mDNS unavailable: \(why)"
        case .invalidServiceDescription(let why): "invalid service description: \(why)"
        case .avahiFailure(let code, let message): "Avahi error \(code): \(message)"
        case .alreadyStarted: "discovery was already started"
        case .invalidStaticPeer(let entry, let reason): "invalid static peer \"\(entry)\": \(reason)"
        case .unreadableConfigFile(let path, let reason): "cannot read peer list \(path): \(reason)"
        }
    }
}
