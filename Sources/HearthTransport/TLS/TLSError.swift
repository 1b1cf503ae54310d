import HearthIdentity

/// Why a TLS connection failed or was refused.
///
/// `code` says what kind of failure (so the caller can tell a refused peer from a broken
/// network); `reason` is the specific cause, usually OpenSSL's own words ("certificate
/// has expired", "peer did not return a certificate", "unsupported protocol").
public struct TLSError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure. Extensible: compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The handshake failed: wrong protocol version, no certificate, an alert from
        /// the peer, not TLS at all.
        public static let handshakeFailed = Code("handshakeFailed")
        /// The peer's certificate does not chain to the account CA, is outside its
        /// validity period, or has the wrong usage.
        public static let certificateRejected = Code("certificateRejected")
        /// The peer's certificate is valid, but its device was removed from the account
        /// (``DeviceRemovals``): refused with a `certificate_revoked` alert.
        public static let peerRemoved = Code("peerRemoved")
        /// The peer refused this device's certificate as revoked: a device of the account
        /// (its certificate verified) says this device was removed from the account.
        public static let removedByPeer = Code("removedByPeer")
        /// The peer did not agree on ALPN `hearth/1`.
        public static let alpnMismatch = Code("alpnMismatch")
        /// The peer is a valid device of the account, but not the one dialled.
        public static let unexpectedPeer = Code("unexpectedPeer")
        /// The handshake did not finish in time.
        public static let handshakeTimeout = Code("handshakeTimeout")
        /// The connection ended without a close_notify alert: the peer crashed, the
        /// network broke, or someone cut the connection (a truncation attack).
        public static let uncleanShutdown = Code("uncleanShutdown")
        /// OpenSSL reported an error on established-connection traffic.
        public static let protocolError = Code("protocolError")
        /// A write on a connection that is closed or closing.
        public static let closed = Code("closed")
        /// Setting up OpenSSL failed.
        public static let configuration = Code("configuration")
    }

    public var code: Code
    /// The specific cause, in OpenSSL's words where it has them.
    public var reason: String

    public init(code: Code, reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "TLS \(code): \(reason)" }

    public static func handshakeFailed(_ reason: String) -> TLSError { TLSError(code: .handshakeFailed, reason: reason) }
    public static func certificateRejected(_ reason: String) -> TLSError { TLSError(code: .certificateRejected, reason: reason) }
    public static let uncleanShutdown = TLSError(code: .uncleanShutdown, reason: "the connection ended without close_notify")
    public static let closed = TLSError(code: .closed, reason: "the connection is closed")
}
