/// A peer found by discovery: where to connect, and what it announced.
package struct DiscoveredPeer: Sendable, Hashable, Identifiable {
    /// Stable identity within one discovery: `mdns:<instance>.<domain>` for Avahi,
    /// `static:<host>:<port>` for ``StaticDiscovery``.
    package var id: String
    /// The DNS-SD instance name, or `host:port` for a static peer.
    package var name: String
    /// Addresses to try, IPv4 first. May hold several (IPv4 and IPv6, several interfaces).
    package var addresses: [PeerAddress]
    /// The peer's sync TCP port.
    package var port: UInt16
    /// The TXT record as text, key to value (empty for static peers).
    package var txt: [String: String]
    /// The validated Hearth fields, nil for static peers (their identity is proven by TLS).
    package var record: ServiceRecord?

    /// A peer from its parts.
    package init(id: String, name: String, addresses: [PeerAddress], port: UInt16,
                txt: [String: String] = [:], record: ServiceRecord? = nil) {
        self.id = id
        self.name = name
        self.addresses = addresses
        self.port = port
        self.txt = txt
        self.record = record
    }
}

/// One address of a peer.
package struct PeerAddress: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// What kind of host string ``host`` is.
    package enum Family: Int, Sendable, Hashable {
        /// A dotted IPv4 address.
        case ipv4 = 4
        /// A numeric IPv6 address (without scope).
        case ipv6 = 6
        /// A host name, resolved at connect time (static peers only).
        case hostname = 0
    }

    /// Numeric address (no `%scope`) or host name.
    package var host: String
    /// The kind of ``host``.
    package var family: Family
    /// Index of the interface the address was seen on (mDNS only).
    package var interfaceIndex: Int32?
    /// Name of that interface, e.g. `eth0` (mDNS only).
    package var interfaceName: String?

    /// An address from its parts.
    package init(host: String, family: Family, interfaceIndex: Int32? = nil, interfaceName: String? = nil) {
        self.host = host
        self.family = family
        self.interfaceIndex = interfaceIndex
        self.interfaceName = interfaceName
    }

    /// The host to pass to a socket connect: IPv6 link-local addresses get their `%interface`
    /// scope, without which the kernel cannot route them.
    package var connectHost: String {
        if family == .ipv6, host.lowercased().hasPrefix("fe80"), let interfaceName {
            return "\(host)%\(interfaceName)"
        }
        return host
    }

    package var description: String {
        switch family {
        case .ipv6: "[\(connectHost)]"
        default: connectHost
        }
    }

    /// IPv4 first (it needs no scope), then IPv6, then names; then by text.
    package static func < (lhs: PeerAddress, rhs: PeerAddress) -> Bool {
        func rank(_ family: Family) -> Int { family == .ipv4 ? 0 : family == .ipv6 ? 1 : 2 }
        if rank(lhs.family) != rank(rhs.family) { return rank(lhs.family) < rank(rhs.family) }
        if lhs.host != rhs.host { return lhs.host < rhs.host }
        return (lhs.interfaceIndex ?? 0) < (rhs.interfaceIndex ?? 0)
    }
}
