import HearthCore

/// Errors of the discovery layer.
package typealias DiscoveryError = HearthError<DiscoveryErrors>

/// The domain of ``DiscoveryError``.
package enum DiscoveryErrors: HearthErrorDomain {}

extension ErrorCode where Domain == DiscoveryErrors {
    /// No Avahi daemon (or no system D-Bus) is reachable. The engine should fall back to
    /// ``StaticDiscovery``. The reason says what was tried and how to fix it.
    package static var daemonUnavailable: Self { Self("daemonUnavailable") }
    /// The service to publish would be rejected by peers (bad hash, port 0, …).
    package static var invalidServiceDescription: Self { Self("invalidServiceDescription") }
    /// Avahi refused an operation (the reason carries Avahi's error number).
    package static var avahiFailure: Self { Self("avahiFailure") }
    /// ``AvahiDiscovery/start()`` was called twice, or after ``AvahiDiscovery/stop()``.
    package static var alreadyStarted: Self { Self("alreadyStarted") }
    /// A static peer list has an entry that is not `host:port`.
    package static var invalidStaticPeer: Self { Self("invalidStaticPeer") }
    /// A static peer config file could not be read.
    package static var unreadableConfigFile: Self { Self("unreadableConfigFile") }
}

extension HearthError where Domain == DiscoveryErrors {
    package static func daemonUnavailable(_ why: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.daemonUnavailable, "mDNS unavailable: \(why)", file: file, line: line)
    }

    package static func invalidServiceDescription(_ why: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.invalidServiceDescription, "invalid service description: \(why)", file: file, line: line)
    }

    package static func avahiFailure(code: Int32, message: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.avahiFailure, "Avahi error \(code): \(message)", file: file, line: line)
    }

    package static func alreadyStarted(file: String = #fileID, line: UInt = #line) -> Self {
        Self(.alreadyStarted, "discovery was already started", file: file, line: line)
    }

    package static func invalidStaticPeer(entry: String, reason: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.invalidStaticPeer, "invalid static peer \"\(entry)\": \(reason)", file: file, line: line)
    }

    package static func unreadableConfigFile(path: String, reason: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.unreadableConfigFile, "cannot read peer list \(path): \(reason)", file: file, line: line)
    }
}
