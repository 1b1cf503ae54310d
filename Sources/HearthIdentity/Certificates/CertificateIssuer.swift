import CHearthOpenSSL
import Foundation

/// Issues the two kinds of certificate Hearth uses, through OpenSSL's X509 API.
///
/// - An account CA: self-signed, `basicConstraints=critical,CA:TRUE,pathlen:0`,
///   `keyUsage=critical,keyCertSign,cRLSign`. It signs device certificates and nothing else.
/// - A device: signed by the account CA, `basicConstraints=critical,CA:FALSE`,
///   `keyUsage=critical,digitalSignature`, `extendedKeyUsage=serverAuth,clientAuth`
///   (a device is both TLS server and client), subject `O=<account ID>, CN=<device name>`.
///
/// Every certificate has a random 128-bit serial and key identifiers, and is signed with
/// Ed25519 (which takes no separate digest).
package enum CertificateIssuer {
    /// What to issue.
    package enum Kind: Sendable {
        case authority
        case device
    }

    /// How long certificates last unless told otherwise: a household CA for 30 years, a
    /// device for one year. A device asks its peers for a renewal in the last 90 days (any peer
    /// with the account CA unlocked issues it); a device removed from the account is refused at
    /// once whatever its certificate says (docs/security.md).
    package static let authorityLifetime: TimeInterval = 30 * 365.25 * 86_400
    package static let deviceLifetime: TimeInterval = 365.25 * 86_400
    /// Certificates start an hour in the past so that a peer whose clock is a little
    /// behind does not see a brand-new device as "not yet valid".
    package static let backdating: TimeInterval = 3_600

    /// Issues a certificate for `publicKey`.
    ///
    /// - Parameters:
    ///   - commonName: the account's display name or the device's name.
    ///   - organization: for a device, the account ID in hex (informational: trust comes
    ///     from the CA signature, not from the name).
    ///   - issuer: the CA certificate; nil for a self-signed certificate.
    ///   - signingKey: the issuer's private key (the subject's own for self-signed).
    package static func issue(
        kind: Kind,
        commonName: String,
        organization: String? = nil,
        publicKey: Ed25519PublicKey,
        issuer: Certificate?,
        signingKey: Ed25519PrivateKey,
        notBefore: Date? = nil,
        notAfter: Date? = nil
    ) throws -> Certificate {
        guard !commonName.isEmpty else { throw IdentityError(code: .invalidArgument, message: "a certificate needs a name") }
        let now = Date()
        let start = notBefore ?? now.addingTimeInterval(-backdating)
        let end = notAfter ?? now.addingTimeInterval(kind == .authority ? authorityLifetime : deviceLifetime)

        guard let x509 = X509_new() else { throw IdentityError.openSSL("X509_new") }
        let certificate = Certificate(taking: x509)  // frees x509 on any throw below

        guard X509_set_version(x509, Int(X509_VERSION_3)) == 1 else { throw IdentityError.openSSL("X509_set_version") }
        try setRandomSerial(x509)
        guard ASN1_TIME_set(X509_getm_notBefore(x509), time_t(start.timeIntervalSince1970)) != nil,
              ASN1_TIME_set(X509_getm_notAfter(x509), time_t(end.timeIntervalSince1970)) != nil else {
            throw IdentityError.openSSL("setting the validity period")
        }
        guard X509_set_pubkey(x509, publicKey.pointer) == 1 else { throw IdentityError.openSSL("X509_set_pubkey") }

        guard let subject = X509_NAME_new() else { throw IdentityError.openSSL("X509_NAME_new") }
        defer { X509_NAME_free(subject) }
        if let organization { try add("O", organization, to: subject) }
        try add("CN", commonName, to: subject)
        guard X509_set_subject_name(x509, subject) == 1 else { throw IdentityError.openSSL("X509_set_subject_name") }
        let issuerName = issuer.map { X509_get_subject_name($0.pointer) } ?? subject
        guard X509_set_issuer_name(x509, issuerName) == 1 else { throw IdentityError.openSSL("X509_set_issuer_name") }

        let issuerX509 = issuer?.pointer ?? x509
        let extensions: [(Int32, String)]
        switch kind {
        case .authority:
            extensions = [
                (NID_basic_constraints, "critical,CA:TRUE,pathlen:0"),
                (NID_key_usage, "critical,keyCertSign,cRLSign"),
                (NID_subject_key_identifier, "hash"),
                (NID_authority_key_identifier, "keyid:always"),
            ]
        case .device:
            extensions = [
                (NID_basic_constraints, "critical,CA:FALSE"),
                (NID_key_usage, "critical,digitalSignature"),
                (NID_ext_key_usage, "serverAuth,clientAuth"),
                (NID_subject_key_identifier, "hash"),
                (NID_authority_key_identifier, "keyid:always"),
            ]
        }
        for (nid, value) in extensions {
            guard hearth_X509_add_ext_conf(x509, issuerX509, nid, value) == 1 else {
                throw IdentityError.openSSL("adding extension \(value)")
            }
        }
        // Ed25519 signs the message itself: no digest (NULL).
        guard X509_sign(x509, signingKey.pointer, nil) > 0 else { throw IdentityError.openSSL("X509_sign") }
        return certificate
    }

    private static func setRandomSerial(_ x509: OpaquePointer) throws {
        var bytes = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&bytes, Int32(bytes.count)) == 1 else { throw IdentityError.openSSL("RAND_bytes") }
        bytes[0] &= 0x7f  // positive and at most 16 bytes once DER-encoded (RFC 5280 §4.1.2.2)
        bytes[0] |= 0x01  // never zero
        guard let bn = BN_bin2bn(bytes, Int32(bytes.count), nil) else { throw IdentityError.openSSL("BN_bin2bn") }
        defer { BN_free(bn) }
        guard BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x509)) != nil else {
            throw IdentityError.openSSL("BN_to_ASN1_INTEGER")
        }
    }

    private static func add(_ field: String, _ value: String, to name: OpaquePointer) throws {
        let ok = X509_NAME_add_entry_by_txt(name, field, hearth_MBSTRING_UTF8(), value, -1, -1, 0)
        guard ok == 1 else { throw IdentityError.openSSL("adding \(field)=\(value) to a name") }
    }
}
