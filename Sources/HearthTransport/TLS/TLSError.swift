import HearthCore
import HearthIdentity

/// Why a TLS connection failed or was refused.
///
/// `code` says what kind of failure (so the caller can tell a refused peer from a broken
/// network); `reason` is the specific cause, usually OpenSSL's own words ("certificate
/// has expired", "peer did not return a certificate", "unsupported protocol").
package typealias TLSError = HearthError<TLSErrors>

/// The domain of ``TLSError``.
package enum TLSErrors: HearthErrorDomain {
    package static func describe(code: ErrorCode<TLSErrors>, reason: String) -> String { "TLS \(code): \(reason)" }
}

extension ErrorCode where Domain == TLSErrors {
    /// The handshake failed: wrong protocol version, no certificate, an alert from
    /// the peer, not TLS at all.
    package static var handshakeFailed: Self { Self("handshakeFailed") }
    /// The peer's certificate does not chain to the account CA, is outside its
    /// validity period, or has the wrong usage.
    package static var certificateRejected: Self { Self("certificateRejected") }
    /// The peer's certificate is valid, but its device was removed from the account
    /// (``DeviceRemovals``): refused with a `certificate_revoked` alert.
    package static var peerRemoved: Self { Self("peerRemoved") }
    /// The peer refused this device's certificate as revoked: a device of the account
    /// (its certificate verified) says this device was removed from the account.
    package static var removedByPeer: Self { Self("removedByPeer") }
    /// The peer did not agree on ALPN `hearth/1`.
    package static var alpnMismatch: Self { Self("alpnMismatch") }
    /// The peer is a valid device of the account, but not the one dialled.
    package static var unexpectedPeer: Self { Self("unexpectedPeer") }
    /// The handshake did not finish in time.
    package static var handshakeTimeout: Self { Self("handshakeTimeout") }
    /// The connection ended without a close_notify alert: the peer crashed, the
    /// network broke, or someone cut the connection (a truncation attack).
    package static var uncleanShutdown: Self { Self("uncleanShutdown") }
    /// OpenSSL reported an error on established-connection traffic.
    package static var protocolError: Self { Self("protocolError") }
    /// A write on a connection that is closed or closing.
    package static var closed: Self { Self("closed") }
    /// Setting up OpenSSL failed.
    package static var configuration: Self { Self("configuration") }
}

extension HearthError where Domain == TLSErrors {
    package static func handshakeFailed(_ reason: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.handshakeFailed, reason, file: file, line: line)
    }

    package static func certificateRejected(_ reason: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.certificateRejected, reason, file: file, line: line)
    }

    package static func uncleanShutdown(file: String = #fileID, line: UInt = #line) -> Self {
        Self(.uncleanShutdown, "the connection ended without close_notify", file: file, line: line)
    }

    package static func closed(file: String = #fileID, line: UInt = #line) -> Self {
        Self(.closed, "the connection is closed", file: file, line: line)
    }
}
