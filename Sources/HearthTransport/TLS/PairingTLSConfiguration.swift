import HearthIdentity
import Logging
import NIOCore

/// How two devices speak TLS while one of them asks to join the account (pairing,
/// docs/protocol.md "Pairing").
///
/// The newcomer has no account yet, so neither side can verify the other against the account
/// CA during the handshake. Everything else is as strict as a sync connection: TLS 1.3 only,
/// both sides present a certificate and prove its key, no resumption, a handshake timeout; the
/// ALPN is `hearth-pair/1`, so a pairing connection can never be taken for a sync connection or
/// the other way round. Each side learns the other's Ed25519 key from the handshake
/// (``TLSPeer/certificate``); the pairing protocol then binds both keys into the code the
/// people compare, and the newcomer checks the member's certificate against the account CA
/// once it receives it.
///
/// The handshake accepts a leaf certificate whose only faults are that it is self-signed or
/// that its issuer is unknown; it still refuses a certificate out of its validity period, one
/// with the wrong key usage, a CA certificate, a chain longer than the leaf, and a key other
/// than Ed25519.
package struct PairingTLSConfiguration: Sendable {
    /// The key this device proves in the handshake.
    package var privateKey: Ed25519PrivateKey
    /// The certificate it presents: a member's device certificate, or a newcomer's
    /// self-signed one (``selfSigned(deviceName:)``).
    package var certificate: Certificate
    /// How long a handshake may take before the connection is dropped.
    package var handshakeTimeout: TimeAmount
    package var logger: Logger

    /// The ALPN protocol identifier of pairing connections.
    package static let alpnProtocol = "hearth-pair/1"

    /// - Throws: ``IdentityError/Code/invalidKey`` when `certificate` is not for `privateKey`.
    package init(privateKey: Ed25519PrivateKey, certificate: Certificate, handshakeTimeout: TimeAmount = .seconds(10),
                logger: Logger) throws {
        guard certificate.publicKey == privateKey.publicKey else {
            throw IdentityError(code: .invalidKey, message: "the pairing key does not match its certificate")
        }
        self.privateKey = privateKey
        self.certificate = certificate
        self.handshakeTimeout = handshakeTimeout
        self.logger = logger
    }

    /// A member's pairing configuration: its device key and certificate.
    package init(identity: DeviceIdentity, handshakeTimeout: TimeAmount = .seconds(10),
                logger: Logger) throws {
        try self.init(privateKey: identity.privateKey, certificate: identity.certificate,
                      handshakeTimeout: handshakeTimeout, logger: logger)
    }

    /// A newcomer's pairing configuration: a fresh Ed25519 key (the one it will keep as its
    /// device key) and a self-signed certificate named `deviceName`, shaped like a device
    /// certificate (not a CA, `digitalSignature`, `serverAuth` and `clientAuth`).
    package static func selfSigned(deviceName: String, handshakeTimeout: TimeAmount = .seconds(10),
                                  logger: Logger) throws -> PairingTLSConfiguration {
        let key = try Ed25519PrivateKey()
        let certificate = try CertificateIssuer.issue(kind: .device, commonName: deviceName, publicKey: key.publicKey,
                                                      issuer: nil, signingKey: key)
        return try PairingTLSConfiguration(privateKey: key, certificate: certificate,
                                           handshakeTimeout: handshakeTimeout, logger: logger)
    }
}
