import Foundation

/// What a device needs to join an account: the CA certificate and the CA private key,
/// the key encrypted under the account passphrase.
///
/// A text file, so it can be mailed, copied on a stick or pasted:
///
/// ```text
/// Hearth join bundle v1
/// -----BEGIN CERTIFICATE-----            the account CA certificate (public)
/// -----BEGIN ENCRYPTED PRIVATE KEY-----  the CA key: PKCS#8, PBES2, scrypt + AES-256-CBC
/// ```
///
/// The key is the member's `ca.key` as it is stored (``AccountStore/exportJoinBundle(_:)``),
/// sealed under the account passphrase: the joiner needs that passphrase to sign its own
/// certificate, then stores the same sealed key, so that it too can admit and remove devices
/// with the passphrase. Bundles made before (sealed under a passphrase of their own, with
/// scrypt N = 2^14 or 2^18) open the same way; that passphrase then protects the joiner's key.
///
/// The certificate is not encrypted, but it is bound to the key: import checks that the
/// decrypted key is the certificate's, so an altered certificate is refused as damaged.
package struct JoinBundle: Sendable {
    /// The first line of every bundle.
    package static let header = "Hearth join bundle v1"

    /// The largest bundle read: a certificate and a key take about 1.5 KB.
    package static let maximumSize = 64 * 1024

    /// Seals `authority` under `passphrase` with scrypt ``ScryptParameters/standard``.
    ///
    /// A joiner stores the key as sealed here, so `passphrase` becomes its account passphrase:
    /// give the account's. ``AccountStore/exportJoinBundle(_:)`` needs no passphrase at all.
    package static func export(_ authority: AccountAuthority, passphrase: String) throws -> Data {
        try export(authority, passphrase: passphrase, scrypt: .standard)
    }

    /// The same with chosen scrypt parameters (cheap ones for test clusters).
    package static func export(_ authority: AccountAuthority, passphrase: String, scrypt: ScryptParameters) throws -> Data {
        make(certificate: authority.account.caCertificate, sealedKey: try authority.privateKey.sealed(passphrase: passphrase, scrypt: scrypt))
    }

    /// The bundle of a CA certificate and a CA key already sealed (an account's `ca.key`).
    package static func make(certificate: Certificate, sealedKey: EncryptedPrivateKeyInfo) -> Data {
        Data((header + "\n" + certificate.pemEncoded + sealedKey.pem).utf8)
    }

    /// Opens a bundle.
    ///
    /// The key's scrypt parameters are checked before the KDF runs, so a crafted bundle
    /// costs at most one guess at ``ScryptParameters/maximum``.
    ///
    /// - Throws: ``IdentityError/Code/wrongPassphrase`` when the passphrase does not
    ///   decrypt the key; ``IdentityError/Code/keyDerivationRefused`` when the key's KDF,
    ///   cipher or scrypt parameters are not what Hearth writes;
    ///   ``IdentityError/Code/damagedBundle`` when the bundle is truncated, altered or
    ///   not a bundle.
    package static func open(_ data: Data, passphrase: String) throws -> AccountAuthority {
        try openSealed(data, passphrase: passphrase).authority
    }

    /// Opens a bundle, and returns its key as sealed too (what a joiner stores as its `ca.key`).
    /// Throws as ``open(_:passphrase:)``.
    package static func openSealed(_ data: Data, passphrase: String) throws -> (authority: AccountAuthority, sealedKey: EncryptedPrivateKeyInfo) {
        guard data.count <= maximumSize else {
            throw IdentityError(code: .damagedBundle, message: "the file is \(data.count) bytes; a join bundle is a few kilobytes (at most \(maximumSize))")
        }
        guard let text = String(data: data, encoding: .utf8), text.hasPrefix(header) else {
            throw IdentityError(code: .damagedBundle, message: "not a Hearth join bundle (the first line is not \"\(header)\")")
        }
        let certificate: Certificate
        let account: Account
        do {
            certificate = try Certificate(pemEncoded: text)
            account = try Account(caCertificate: certificate)
        } catch let error as IdentityError {
            throw IdentityError(code: .damagedBundle, message: "the bundle's account certificate is damaged", openSSLReasons: error.openSSLReasons)
        }
        let key: Ed25519PrivateKey
        let sealed: EncryptedPrivateKeyInfo
        do {
            sealed = try EncryptedPrivateKeyInfo(pem: text)
            key = try Ed25519PrivateKey(sealed: sealed, passphrase: passphrase)
        } catch let error as IdentityError where error.code == .keyDerivationRefused {
            throw IdentityError(code: .keyDerivationRefused, message: "refused before decrypting: \(error.message)")
        } catch let error as IdentityError where error.code == .wrongPassphrase {
            throw IdentityError(code: .wrongPassphrase,
                                message: "the passphrase does not open this join bundle (or its key is damaged)",
                                openSSLReasons: error.openSSLReasons)
        } catch let error as IdentityError {
            throw IdentityError(code: .damagedBundle, message: "the bundle has no readable account key", openSSLReasons: error.openSSLReasons)
        }
        do {
            return (try AccountAuthority(account: account, privateKey: key), sealed)
        } catch {
            throw IdentityError(code: .damagedBundle, message: "the bundle's key and certificate do not belong together")
        }
    }
}
