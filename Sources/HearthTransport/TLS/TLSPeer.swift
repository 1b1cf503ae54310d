import HearthIdentity

/// The authenticated peer of a TLS connection: a device of the same account (on a pairing
/// connection, ``PairingTLSConfiguration``: whoever proved the key of the certificate it presented).
package struct TLSPeer: Sendable, CustomStringConvertible {
    /// SHA-256 of the peer's device public key, from its verified certificate.
    package let deviceID: DeviceID
    /// The peer's device certificate, verified against the account CA during the handshake
    /// (pairing: the leaf alone, its key proven).
    package let certificate: Certificate

    package init(deviceID: DeviceID, certificate: Certificate) {
        self.deviceID = deviceID
        self.certificate = certificate
    }

    package var description: String { "\(certificate.commonName ?? "?") (\(deviceID.short))" }
}

/// Events the TLS handler sends up the pipeline.
package enum TLSEvent: Sendable {
    /// Both sides are authenticated and application data may flow. Fired before any
    /// application data is passed on.
    case handshakeCompleted(TLSPeer)
}
