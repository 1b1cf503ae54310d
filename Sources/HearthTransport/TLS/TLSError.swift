import HearthIdentity

/// Why a TLS connection failed or was refused.
///
/// `code` says what kind of failure (so the caller can tell a refused peer from a broken
/// network); `reason` is the specific cause, usually OpenSSL's own words ("certificate
/// has expired", "peer did not return a certificate", "unsupported protocol").
package struct TLSError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure. Extensible: compare against the static members.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        package let name: String
        package init(_ name: String) { self.name = name }
        package var description: String { name }

        /// The handshake failed: wrong protocol version, no certificate, an alert from
        /// the peer, not TLS at all.
        package static let handshakeFailed = Code("handshakeFailed")
        /// The peer's certificate does not chain to the account CA, is outside its
        /// validity period, or has the wrong usage.
        package static let certificateRejected = Code("certificateRejected")
        /// The peer's certificate is valid, but its device was removed from the account
        /// (``DeviceRemovals``): refused with a `certificate_revoked` alert.
        package static let peerRemoved = Code("peerRemoved")
        /// The peer refused this device's certificate as revoked: a device of the account
        /// (its certificate verified) says this device was removed from the account.
        package static let removedByPeer = Code("removedByPeer")
        /// The peer did not agree on ALPN `hearth/1`.
        package static let alpnMismatch = Code("alpnMismatch")
        /// The peer is a valid device of the account, but not the one dialled.
        package static let unexpectedPeer = Code("unexpectedPeer")
        /// The handshake did not finish in time.
        package static let handshakeTimeout = Code("handshakeTimeout")
        /// The connection ended without a close_notify alert: the peer crashed, the
        /// network broke, or someone cut the connection (a truncation attack).
        package static let uncleanShutdown = Code("uncleanShutdown")
        /// OpenSSL reported an error on established-connection traffic.
        package static let protocolError = Code("protocolError")
        /// A write on a connection that is closed or closing.
        package static let closed = Code("closed")
        /// Setting up OpenSSL failed.
        package static let configuration = Code("configuration")
    }

    package var code: Code
    /// The specific cause, in OpenSSL's words where it has them.
    package var reason: String

    package init(code: Code, reason: String) {
        self.code = code
        self.reason = reason
    }

    package var description: String { "TLS \(code): \(reason)" }

    package static func handshakeFailed(_ reason: String) -> TLSError { TLSError(code: .handshakeFailed, reason: reason) }
    package static func certificateRejected(_ reason: String) -> TLSError { TLSError(code: .certificateRejected, reason: reason) }
    package static let uncleanShutdown = TLSError(code: .uncleanShutdown, reason: "the connection ended without close_notify")
    package static let closed = TLSError(code: .closed, reason: "the connection is closed")
}
