import HearthIdentity
import Logging
import NIOCore

/// How a device speaks TLS to its peers.
///
/// Fixed by the protocol, not configurable: TLS 1.3 only, mutual authentication, the
/// account CA as the only trust anchor, ALPN `hearth/1`, no session tickets or resumption
/// (each connection proves the certificate again), no renegotiation.
package struct TLSConfiguration: Sendable {
    /// The certificate and key this device presents.
    package var identity: DeviceIdentity
    /// The CA certificate peers must chain to. The identity's account CA unless a test
    /// needs a client that trusts one account while presenting another's certificate.
    package var trustAnchor: Certificate
    /// How long a handshake may take before the connection is dropped, so that a peer
    /// that opens a socket and sends nothing does not hold it forever.
    package var handshakeTimeout: TimeAmount
    /// The devices removed from the account: their certificates are refused in the handshake
    /// (the peer gets a `certificate_revoked` alert), whichever side dialled. Shared and live:
    /// a removal learned later is honoured by the next handshake.
    package var removals: DeviceRemovals?
    /// What a removed device that dials this one is told: the bytes to send it (one frame
    /// holding the account-signed removal record), or nil. When set, such a device completes
    /// the handshake as a server's client, gets these bytes and a close, and never reaches the
    /// application: the signed record, not a bare alert, is what may mark a device removed
    /// (issue 26). When nil (or this side dials), it is refused with the alert as before.
    package var removalNotice: (@Sendable (DeviceID) -> [UInt8]?)?
    package var logger: Logger

    /// The ALPN protocol identifier: the version of the Hearth protocol spoken inside.
    package static let alpnProtocol = "hearth/1"

    package init(identity: DeviceIdentity, trustAnchor: Certificate? = nil,
                handshakeTimeout: TimeAmount = .seconds(10), removals: DeviceRemovals? = nil,
                removalNotice: (@Sendable (DeviceID) -> [UInt8]?)? = nil, logger: Logger) {
        self.identity = identity
        self.removals = removals
        self.removalNotice = removalNotice
        self.trustAnchor = trustAnchor ?? identity.account.caCertificate
        self.handshakeTimeout = handshakeTimeout
        self.logger = logger
    }
}
