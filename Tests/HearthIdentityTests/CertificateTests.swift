import Foundation
import HearthIdentity
import Testing

@Suite("Account and device certificates")
struct CertificateTests {
    @Test("An account CA is a self-signed Ed25519 CA; its ID is the hash of its key")
    func account() throws {
        let authority = try AccountAuthority.create(displayName: "The Smiths")
        let ca = authority.account.caCertificate
        #expect(ca.isCertificateAuthority)
        #expect(ca.isSelfSigned)
        #expect(ca.commonName == "The Smiths")
        #expect(authority.account.displayName == "The Smiths")
        #expect(authority.account.id == AccountID(caPublicKey: authority.privateKey.publicKey))
        #expect(authority.account.id.hex.count == 64)
        #expect(ca.serialNumber.count >= 30)
        // Round trip through DER and PEM.
        #expect(try Certificate(derEncoded: ca.derEncoded) == ca)
        #expect(try Certificate(pemEncoded: ca.pemEncoded) == ca)
    }

    @Test("A device certificate is signed by the CA, names the device and the account, and is valid now")
    func device() throws {
        let authority = try AccountAuthority.create(displayName: "The Smiths")
        let device = try authority.makeDevice(named: "kitchen-laptop")
        let cert = device.certificate
        #expect(!cert.isCertificateAuthority)
        #expect(!cert.isSelfSigned)
        #expect(cert.commonName == "kitchen-laptop")
        #expect(cert.organization == authority.account.id.hex)
        #expect(cert.issuerCommonName == "The Smiths")
        #expect(cert.notValidBefore < Date())
        #expect(cert.notValidAfter > Date().addingTimeInterval(364 * 86_400))
        #expect(try authority.account.trust.validateDevice(cert) == device.deviceID)
        #expect(device.deviceID == DeviceID(publicKey: device.privateKey.publicKey))
        #expect(device.deviceID.fingerprint.split(separator: "-").count == 13)
        // Two devices never share a serial or an ID.
        let other = try authority.makeDevice(named: "kitchen-laptop")
        #expect(other.certificate.serialNumber != cert.serialNumber)
        #expect(other.deviceID != device.deviceID)
    }

    @Test("Expired, not-yet-valid, self-signed, foreign and CA certificates are rejected with OpenSSL's reason")
    func rejected() throws {
        let authority = try AccountAuthority.create(displayName: "The Smiths")
        let trust = authority.account.trust
        let now = Date()
        let expired = try authority.makeDevice(named: "old", notBefore: now.addingTimeInterval(-86_400 * 2),
                                               notAfter: now.addingTimeInterval(-86_400))
        let future = try authority.makeDevice(named: "future", notBefore: now.addingTimeInterval(86_400),
                                              notAfter: now.addingTimeInterval(86_400 * 2))
        let key = try Ed25519PrivateKey()
        let selfSigned = try CertificateIssuer.issue(kind: .device, commonName: "rogue", publicKey: key.publicKey,
                                                     issuer: nil, signingKey: key)
        let foreign = try AccountAuthority.create(displayName: "Strangers").makeDevice(named: "intruder")

        let cases: [(Certificate, String)] = [
            (expired.certificate, "expired"),
            (future.certificate, "not yet valid"),
            (selfSigned, "self-signed"),
            (foreign.certificate, "unable to get local issuer certificate"),
            (authority.account.caCertificate, "purpose"),
        ]
        for (certificate, reason) in cases {
            let error = #expect(throws: IdentityError.self) { try trust.validateDevice(certificate) }
            #expect(error?.code == .certificateRejected)
            #expect(error?.message.contains(reason) == true, "\(error?.message ?? "") should mention \(reason)")
        }
        // The not-yet-valid certificate is fine once its time comes.
        #expect(throws: Never.self) { try trust.validateDevice(future.certificate, at: now.addingTimeInterval(86_400 * 1.5)) }
    }

    @Test("mDNS hashes are 16 hex digits, differ per kind, and do not reveal the IDs")
    func mdnsHashes() throws {
        let authority = try AccountAuthority.create(displayName: "The Smiths")
        let device = try authority.makeDevice(named: "laptop")
        let id = authority.account.id
        let hashes = [id.shortHash, id.storeHash(storeIdentifier: "com.example.notes"),
                      id.storeHash(storeIdentifier: "com.example.todo"), device.deviceID.shortHash]
        for hash in hashes {
            #expect(hash.count == 16)
            #expect(hash.allSatisfy { "0123456789abcdef".contains($0) })
        }
        #expect(Set(hashes).count == 4)
        #expect(!id.hex.hasPrefix(id.shortHash))
        #expect(!device.deviceID.hex.hasPrefix(device.deviceID.shortHash))
        // Stable: every device of the account computes the same values.
        #expect(id.shortHash == AccountID(hex: id.hex)!.shortHash)
        let other = try AccountAuthority.create(displayName: "Others").account.id
        #expect(other.storeHash(storeIdentifier: "com.example.notes") != id.storeHash(storeIdentifier: "com.example.notes"))
    }

    @Test("Garbage is not a certificate or a key")
    func garbage() throws {
        #expect(throws: IdentityError.self) { try Certificate(derEncoded: [1, 2, 3]) }
        #expect(throws: IdentityError.self) { try Certificate(pemEncoded: "hello") }
        #expect(throws: IdentityError.self) { try Ed25519PrivateKey(rawRepresentation: [1, 2, 3]) }
        #expect(throws: IdentityError.self) { try Ed25519PrivateKey(pemRepresentation: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n") }
        let authority = try AccountAuthority.create(displayName: "x")
        // DER with trailing bytes is not exactly one certificate.
        #expect(throws: IdentityError.self) { try Certificate(derEncoded: authority.account.caCertificate.derEncoded + [0]) }
    }

    @Test("OpenSSL errors carry the library's reason string")
    func openSSLReason() throws {
        let error = #expect(throws: IdentityError.self) { try Certificate(derEncoded: [0x30, 0x03, 0x02, 0x01, 0x01]) }
        #expect(error?.code == .invalidCertificate)
        #expect(error?.openSSLReasons.isEmpty == false)
    }
}
