import CHearthOpenSSL
import Foundation
import HearthCore

/// Decides whether a device certificate belongs to an account.
///
/// Trust has one anchor: the account's CA certificate. A device certificate is accepted
/// when OpenSSL's chain verification succeeds against that anchor alone (signature,
/// validity dates, strict X.509 checks, the TLS client purpose, which needs the
/// `digitalSignature` key usage) and when it is an end-entity certificate with an
/// Ed25519 key. There are no intermediates: the chain is exactly device → CA.
package struct AccountTrust: Sendable {
    /// The account's self-signed CA certificate.
    package let caCertificate: Certificate
    /// SHA-256 of the CA's public key.
    package let accountID: AccountID

    private let store: TrustStore

    /// - Throws: ``IdentityError/Code/invalidCertificate`` unless `caCertificate` is a
    ///   self-signed CA certificate with an Ed25519 key.
    package init(caCertificate: Certificate) throws {
        guard let key = caCertificate.publicKey else {
            throw IdentityError(code: .invalidCertificate, message: "the account CA certificate has no Ed25519 key")
        }
        guard caCertificate.isCertificateAuthority, caCertificate.isSelfSigned else {
            OpenSSLErrorQueue.clear()
            throw IdentityError(code: .invalidCertificate, message: "not a self-signed CA certificate")
        }
        self.caCertificate = caCertificate
        accountID = AccountID(caPublicKey: key)
        store = try TrustStore(anchor: caCertificate)
    }

    /// Checks `certificate` as a device certificate of this account at `date`, and
    /// returns the device ID it names.
    ///
    /// - Throws: ``IdentityError/Code/certificateRejected`` with OpenSSL's reason
    ///   ("certificate has expired", "unable to get local issuer certificate", ...).
    @discardableResult
    package func validateDevice(_ certificate: Certificate, at date: Date = Date()) throws -> DeviceID {
        try store.verify(certificate, at: date)
        guard !certificate.isCertificateAuthority else {
            throw IdentityError.certificateRejected("a CA certificate cannot act as a device")
        }
        guard let key = certificate.publicKey else {
            throw IdentityError.certificateRejected("the device key is not Ed25519")
        }
        return DeviceID(publicKey: key)
    }

    /// Checks that this account's CA issued `certificate` as a device certificate, whether or
    /// not it has expired since: its chain is checked as of the start of its validity (or the
    /// CA's, if the certificate is backdated before it). For what an expired certificate still
    /// vouches for: the entries its device signed while it was valid, the devices met.
    @discardableResult
    package func validateIssued(_ certificate: Certificate) throws -> DeviceID {
        let date = max(certificate.notValidBefore, caCertificate.notValidBefore)
        return try validateDevice(certificate, at: min(date, certificate.notValidAfter))
    }

    // Entries are verified in one place, ``DeviceCertificateCache/verify(entry:storeIdentifier:)``,
    // against certificates admitted there (checked here once each).
}

/// An `X509_STORE` holding one trust anchor. OpenSSL locks the store internally, so one
/// store may verify from several threads.
private final class TrustStore: @unchecked Sendable {
    let pointer: OpaquePointer

    init(anchor: Certificate) throws {
        guard let store = X509_STORE_new() else { throw IdentityError.openSSL("X509_STORE_new") }
        pointer = store
        guard X509_STORE_add_cert(store, anchor.pointer) == 1 else { throw IdentityError.openSSL("X509_STORE_add_cert") }
    }

    deinit { X509_STORE_free(pointer) }

    func verify(_ certificate: Certificate, at date: Date) throws {
        guard let context = X509_STORE_CTX_new() else { throw IdentityError.openSSL("X509_STORE_CTX_new") }
        defer { X509_STORE_CTX_free(context) }
        OpenSSLErrorQueue.clear()
        guard X509_STORE_CTX_init(context, pointer, certificate.pointer, nil) == 1 else {
            throw IdentityError.openSSL("X509_STORE_CTX_init")
        }
        // Same rules as the TLS handshake: strict parsing, the anchor only, the client
        // purpose (digitalSignature + clientAuth), at the given time.
        X509_STORE_CTX_set_flags(context, UInt(X509_V_FLAG_X509_STRICT))
        _ = X509_STORE_CTX_set_purpose(context, X509_PURPOSE_SSL_CLIENT)
        X509_STORE_CTX_set_time(context, 0, time_t(date.timeIntervalSince1970))
        if X509_verify_cert(context) != 1 {
            let code = X509_STORE_CTX_get_error(context)
            let reason = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "error \(code)"
            throw IdentityError.certificateRejected(reason)
        }
    }
}
