import Foundation

/// An account: a household whose devices share data.
///
/// Its identity is its certificate authority: the account ID is the SHA-256 of the CA's
/// Ed25519 public key, and the display name is the CA certificate's common name. The CA
/// private key is not part of this value (see ``AccountAuthority``).
package struct Account: Sendable, CustomStringConvertible {
    package let id: AccountID
    package let displayName: String
    package let trust: AccountTrust

    package var caCertificate: Certificate { trust.caCertificate }

    /// - Throws: when `caCertificate` is not a self-signed Ed25519 CA certificate.
    package init(caCertificate: Certificate) throws {
        trust = try AccountTrust(caCertificate: caCertificate)
        id = trust.accountID
        displayName = caCertificate.commonName ?? ""
    }

    package var description: String { "\(displayName) (\(id.short))" }
}

/// An account together with its CA private key: what can admit new devices.
///
/// Devices store the key encrypted under the account passphrase (the join bundle carries it
/// the same way), so a device lets a new one in only with that passphrase:
/// ``AccountStore/loadAuthority(_:passphrase:)`` makes this value. docs/security.md discusses
/// what that means.
package struct AccountAuthority: Sendable {
    package let account: Account
    package let privateKey: Ed25519PrivateKey

    /// - Throws: ``IdentityError/Code/invalidKey`` when the key is not the CA certificate's.
    package init(account: Account, privateKey: Ed25519PrivateKey) throws {
        guard account.caCertificate.publicKey == privateKey.publicKey else {
            throw IdentityError(code: .invalidKey, message: "the private key does not belong to the account CA certificate")
        }
        self.account = account
        self.privateKey = privateKey
    }

    /// A new account: a fresh Ed25519 CA key and self-signed CA certificate named `displayName`.
    package static func create(displayName: String) throws -> AccountAuthority {
        let key = try Ed25519PrivateKey()
        let certificate = try CertificateIssuer.issue(kind: .authority, commonName: displayName,
                                                      publicKey: key.publicKey, issuer: nil, signingKey: key)
        return try AccountAuthority(account: Account(caCertificate: certificate), privateKey: key)
    }

    /// Issues a device certificate for `publicKey`, named `deviceName`.
    package func issueDeviceCertificate(for publicKey: Ed25519PublicKey, deviceName: String,
                                       notBefore: Date? = nil, notAfter: Date? = nil) throws -> Certificate {
        try CertificateIssuer.issue(kind: .device, commonName: deviceName, organization: account.id.hex,
                                    publicKey: publicKey, issuer: account.caCertificate, signingKey: privateKey,
                                    notBefore: notBefore, notAfter: notAfter)
    }

    /// A new device of this account: a fresh key and a certificate for it.
    package func makeDevice(named deviceName: String, notBefore: Date? = nil, notAfter: Date? = nil) throws -> DeviceIdentity {
        let key = try Ed25519PrivateKey()
        let certificate = try issueDeviceCertificate(for: key.publicKey, deviceName: deviceName,
                                                     notBefore: notBefore, notAfter: notAfter)
        return try DeviceIdentity(account: account, privateKey: key, certificate: certificate)
    }
}
