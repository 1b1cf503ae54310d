import CHearthOpenSSL
import Foundation

/// An X.509 certificate, held as an OpenSSL `X509`.
///
/// Immutable once parsed or issued (nothing here mutates the `X509`), and OpenSSL's
/// accessors used here only read it, hence Sendable.
package final class Certificate: @unchecked Sendable, Hashable, CustomStringConvertible {
    package let pointer: OpaquePointer

    /// Takes ownership of one reference to `pointer`.
    package init(taking pointer: OpaquePointer) {
        _ = OpenSSLRuntime.ready
        self.pointer = pointer
    }

    /// Adds a reference to `pointer` (for certificates borrowed from an `SSL`).
    package init(retaining pointer: OpaquePointer) {
        _ = OpenSSLRuntime.ready
        X509_up_ref(pointer)
        self.pointer = pointer
    }

    /// Parses DER.
    package convenience init(derEncoded: some Collection<UInt8>) throws {
        _ = OpenSSLRuntime.ready
        let der = Array(derEncoded)
        let parsed = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            let x509 = d2i_X509(nil, &cursor, buffer.count)
            // Trailing bytes mean the input is not exactly one certificate.
            if let x509, cursor != buffer.baseAddress.map({ $0 + buffer.count }) {
                X509_free(x509)
                return nil
            }
            return x509
        }
        guard let parsed else { throw IdentityError.invalidCertificate("parsing a DER certificate") }
        self.init(taking: parsed)
    }

    /// Parses the first "CERTIFICATE" block of a PEM text.
    package convenience init(pemEncoded: String) throws {
        _ = OpenSSLRuntime.ready
        let parsed = MemoryBIO.read(Array(pemEncoded.utf8)) { bio in
            PEM_read_bio_X509(bio, nil, hearth_pem_passphrase_callback_pointer(), nil)
        }
        guard let parsed = parsed ?? nil else { throw IdentityError.invalidCertificate("parsing a PEM certificate") }
        self.init(taking: parsed)
    }

    deinit { X509_free(pointer) }

    /// The DER encoding: what travels with deltas and what the fingerprint covers.
    package var derEncoded: [UInt8] {
        let length = i2d_X509(pointer, nil)
        precondition(length > 0, "i2d_X509 failed on a parsed certificate")
        var bytes = [UInt8](repeating: 0, count: Int(length))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            _ = i2d_X509(pointer, &cursor)
        }
        return bytes
    }

    /// The PEM encoding ("CERTIFICATE").
    package var pemEncoded: String {
        let bytes = MemoryBIO.collect { PEM_write_bio_X509($0, pointer) == 1 }
        return String(decoding: bytes ?? [], as: UTF8.self)
    }

    /// The subject's public key, if it is an Ed25519 key.
    package var publicKey: Ed25519PublicKey? {
        guard let key = X509_get0_pubkey(pointer) else { return nil }
        EVP_PKEY_up_ref(key)
        return try? Ed25519PublicKey(taking: key)
    }

    /// The subject's common name (the account's display name or the device's name).
    package var commonName: String? { Self.commonName(of: X509_get_subject_name(pointer)) }

    /// The subject's organization: the account a device belongs to.
    package var organization: String? { Self.entry(NID_organizationName, of: X509_get_subject_name(pointer)) }

    /// The issuer's common name.
    package var issuerCommonName: String? { Self.commonName(of: X509_get_issuer_name(pointer)) }

    package var notValidBefore: Date { Self.date(X509_get0_notBefore(pointer)) }
    package var notValidAfter: Date { Self.date(X509_get0_notAfter(pointer)) }

    /// The serial number in hexadecimal.
    package var serialNumber: String {
        guard let serial = X509_get0_serialNumber(pointer), let bn = ASN1_INTEGER_to_BN(serial, nil) else { return "" }
        defer { BN_free(bn) }
        guard let hex = BN_bn2hex(bn) else { return "" }
        defer { hearth_OPENSSL_free(hex) }
        return String(cString: hex).lowercased()
    }

    /// Whether basicConstraints marks it as a certificate authority.
    package var isCertificateAuthority: Bool { X509_check_ca(pointer) != 0 }

    /// Whether the subject and issuer are the same and the signature verifies with its own key.
    package var isSelfSigned: Bool { X509_self_signed(pointer, 1) == 1 }

    package static func == (a: Certificate, b: Certificate) -> Bool { a.derEncoded == b.derEncoded }
    package func hash(into hasher: inout Hasher) { hasher.combine(derEncoded) }

    package var description: String {
        "Certificate(CN=\(commonName ?? "?"), issuer CN=\(issuerCommonName ?? "?"), serial \(serialNumber))"
    }

    // MARK: helpers

    private static func commonName(of name: OpaquePointer?) -> String? { entry(NID_commonName, of: name) }

    private static func entry(_ nid: Int32, of name: OpaquePointer?) -> String? {
        guard let name else { return nil }
        let index = X509_NAME_get_index_by_NID(name, nid, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index),
              let data = X509_NAME_ENTRY_get_data(entry) else { return nil }
        var utf8: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&utf8, data)
        guard length >= 0, let utf8 else { return nil }
        defer { hearth_OPENSSL_free(utf8) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
    }

    private static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date {
        var tm = tm()
        guard let time, ASN1_TIME_to_tm(time, &tm) == 1 else { return .distantPast }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&tm)))
    }
}
