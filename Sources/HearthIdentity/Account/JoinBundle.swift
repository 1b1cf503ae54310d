import Foundation

/// What a device needs to join an account: the CA certificate and the CA private key,
/// the key encrypted under a passphrase.
///
/// A text file, so it can be mailed, copied on a stick or pasted:
///
/// ```text
/// Hearth join bundle v1
/// -----BEGIN CERTIFICATE-----            the account CA certificate (public)
/// -----BEGIN ENCRYPTED PRIVATE KEY-----  the CA key: PKCS#8, PBES2, scrypt + AES-256-CBC
/// ```
///
/// The certificate is not encrypted, but it is bound to the key: import checks that the
/// decrypted key is the certificate's, so an altered certificate is refused as damaged.
public struct JoinBundle: Sendable {
    /// The first line of every bundle.
    public static let header = "Hearth join bundle v1"

    /// The largest bundle read: a certificate and a key take about 1.5 KB.
    public static let maximumSize = 64 * 1024

    /// Seals `authority` under `passphrase` with scrypt ``ScryptParameters/standard``.
    public static func export(_ authority: AccountAuthority, passphrase: String) throws -> Data {
        try export(authority, passphrase: passphrase, scrypt: .standard)
    }

    /// The same with chosen scrypt parameters (cheap ones for test clusters).
    package static func export(_ authority: AccountAuthority, passphrase: String, scrypt: ScryptParameters) throws -> Data {
        let key = try authority.privateKey.encryptedPEMRepresentation(passphrase: passphrase, scrypt: scrypt)
        let text = header + "\n" + authority.account.caCertificate.pemEncoded + key
        return Data(text.utf8)
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
    public static func open(_ data: Data, passphrase: String) throws -> AccountAuthority {
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
        do {
            key = try Ed25519PrivateKey(encryptedPEMRepresentation: text, passphrase: passphrase)
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
            return try AccountAuthority(account: account, privateKey: key)
        } catch {
            throw IdentityError(code: .damagedBundle, message: "the bundle's key and certificate do not belong together")
        }
    }
}
