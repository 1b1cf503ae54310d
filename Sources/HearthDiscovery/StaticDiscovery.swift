import Foundation
import Logging

/// Peers from a fixed list of `host:port`, for networks without mDNS (containers, guest
/// Wi-Fi, VPNs). It publishes nothing: the other devices must list this one too.
///
/// The list comes from code, from the `HEARTH_PEERS` environment variable
/// (`"192.168.1.20:7420, laptop.lan:7420, [fd00::2]:7420"`), or from a file
/// (`$XDG_CONFIG_HOME/hearth/peers`, one entry per line, `#` starts a comment).
/// Static peers carry no ``ServiceRecord``: who they are is proven by TLS when connecting.
package final class StaticDiscovery: PeerDiscovery {
    /// The environment variable read by ``fromEnvironment(_:)``.
    package static let environmentVariable = "HEARTH_PEERS"

    /// One `host:port` entry.
    package struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        /// Host name or numeric address (IPv6 without brackets).
        package var host: String
        /// TCP port.
        package var port: UInt16

        /// An endpoint from its parts.
        package init(host: String, port: UInt16) {
            self.host = host
            self.port = port
        }

        /// Parses `host:port`, `1.2.3.4:port` or `[v6addr]:port`.
        ///
        /// - Throws: ``DiscoveryError/invalidStaticPeer(entry:reason:)``.
        package init(parsing text: String) throws(DiscoveryError) {
            let entry = text.trimmingCharacters(in: .whitespaces)
            func fail(_ reason: String) -> DiscoveryError { .invalidStaticPeer(entry: entry, reason: reason) }
            let host: Substring, portText: Substring
            if entry.hasPrefix("[") {
                guard let close = entry.firstIndex(of: "]") else { throw fail("missing ]") }
                host = entry[entry.index(after: entry.startIndex)..<close]
                let rest = entry[entry.index(after: close)...]
                guard rest.hasPrefix(":") else { throw fail("expected [address]:port") }
                portText = rest.dropFirst()
            } else {
                guard let colon = entry.lastIndex(of: ":") else { throw fail("expected host:port") }
                host = entry[..<colon]
                portText = entry[entry.index(after: colon)...]
                if host.contains(":") { throw fail("IPv6 addresses must be written [address]:port") }
            }
            guard !host.isEmpty else { throw fail("empty host") }
            guard host.allSatisfy({ $0.isLetter || $0.isNumber || ".-_:%".contains($0) }) else {
                throw fail("invalid character in host")
            }
            guard !portText.isEmpty, portText.allSatisfy(\.isNumber), let port = UInt16(portText), port > 0 else {
                throw fail("port must be 1...65535")
            }
            self.init(host: String(host), port: port)
        }

        package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        var peer: DiscoveredPeer {
            let family: PeerAddress.Family =
                host.contains(":") ? .ipv6
                : host.split(separator: ".").count == 4 && host.allSatisfy({ $0.isNumber || $0 == "." }) ? .ipv4
                : .hostname
            return DiscoveredPeer(id: "static:\(description)", name: description,
                                  addresses: [PeerAddress(host: host, family: family)], port: port)
        }
    }

    /// The configured endpoints.
    package let endpoints: [Endpoint]
    private let logger: Logger
    private let registry = PeerRegistry()

    /// A discovery of exactly these endpoints (duplicates dropped).
    package init(endpoints: [Endpoint], logger: Logger) {
        var seen = Set<Endpoint>()
        self.endpoints = endpoints.filter { seen.insert($0).inserted }
        self.logger = logger
    }

    /// A discovery from a list of entries separated by commas, spaces or new lines;
    /// `#` comments out the rest of a line.
    ///
    /// - Throws: ``DiscoveryError/invalidStaticPeer(entry:reason:)`` for the first bad entry.
    package convenience init(parsing list: String, logger: Logger) throws {
        try self.init(endpoints: Self.parse(list), logger: logger)
    }

    /// Parses a peer list (see ``init(parsing:logger:)``).
    package static func parse(_ list: String) throws(DiscoveryError) -> [Endpoint] {
        var endpoints: [Endpoint] = []
        for line in list.split(whereSeparator: \.isNewline) {
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            for entry in content.split(whereSeparator: { $0 == "," || $0.isWhitespace }) {
                endpoints.append(try Endpoint(parsing: String(entry)))
            }
        }
        return endpoints
    }

    /// The peers of `HEARTH_PEERS`, or nil when it is unset or empty.
    package static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger
    ) throws -> StaticDiscovery? {
        guard let value = environment[environmentVariable],
              !value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
        else { return nil }
        return try StaticDiscovery(parsing: value, logger: logger)
    }

    /// The default peer file: `$XDG_CONFIG_HOME/hearth/peers`, else `~/.config/hearth/peers`.
    package static func defaultConfigPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return config + "/hearth/peers"
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.config/hearth/peers"
    }

    /// The peers listed in a file.
    ///
    /// - Throws: ``DiscoveryError/unreadableConfigFile(path:reason:)`` or
    ///   ``DiscoveryError/invalidStaticPeer(entry:reason:)``.
    package static func fromConfigFile(
        at path: String, logger: Logger
    ) throws -> StaticDiscovery {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw DiscoveryError.unreadableConfigFile(path: path, reason: "\(error.localizedDescription)")
        }
        return try StaticDiscovery(parsing: text, logger: logger)
    }

    /// `HEARTH_PEERS` if set, else the default peer file if it exists, else nil.
    package static func fromDefaultSources(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger
    ) throws -> StaticDiscovery? {
        if let discovery = try fromEnvironment(environment, logger: logger) { return discovery }
        let path = defaultConfigPath(environment: environment)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        return try fromConfigFile(at: path, logger: logger)
    }

    /// Reports every endpoint as appeared. Static peers never go away by themselves: a peer
    /// that is down simply fails to connect, and the engine retries.
    package func start() async throws {
        logger.info("static discovery with \(endpoints.count) peer(s): \(endpoints.map(\.description).joined(separator: ", "))")
        registry.replaceAll(with: endpoints.map(\.peer))
    }

    package func stop() async { registry.finishAll() }

    package func events() -> AsyncStream<PeerEvent> { registry.subscribe() }

    package var peers: [DiscoveredPeer] { registry.peers }
}
