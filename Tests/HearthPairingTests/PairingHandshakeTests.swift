import Foundation
import Logging
import HearthIdentity
import HearthPairing
import HearthTestSupport
import HearthTransport
import Testing

@Suite("The pairing handshake", .timeLimit(.minutes(1)))
struct PairingHandshakeTests {
    /// A listener presenting `certificate` for `key`, and whether a member (an account device) can complete a handshake with it.
    static func memberReaches(key: Ed25519PrivateKey, certificate: Certificate) async throws -> Result<Certificate, TLSError> {
        return try await withCleanup { cleanup in
            let newcomer = try PeerTransport(pairing: PairingTLSConfiguration(privateKey: key, certificate: certificate, logger: Logger(label: "test")),
                                             maximumFrameLength: PairingMessage.maximumFrameLength)
            let listener = try await newcomer.listen(host: "127.0.0.1", port: 0)
            cleanup { await listener.close() }
            let authority = try AccountAuthority.create(displayName: "Handshake home")
            let member = try PeerTransport(pairing: PairingTLSConfiguration(identity: authority.makeDevice(named: "laptop"), logger: Logger(label: "test")),
                                           maximumFrameLength: PairingMessage.maximumFrameLength)
            do {
                let connection = try await member.connect(host: "127.0.0.1", port: try #require(listener.port))
                await connection.close()
                return .success(connection.peer.certificate)
            } catch let error as TLSError {
                return .failure(error)
            }
        }
    }

    @Test("A newcomer's self-signed device-shaped certificate gets through, and the member sees its key")
    func selfSigned() async throws {
        let key = try Ed25519PrivateKey()
        let certificate = try CertificateIssuer.issue(kind: .device, commonName: "kitchen", publicKey: key.publicKey, issuer: nil, signingKey: key)
        let seen = try await Self.memberReaches(key: key, certificate: certificate).get()
        #expect(seen.publicKey == key.publicKey && seen.commonName == "kitchen")
    }

    @Test("An expired self-signed certificate, or a CA certificate as the leaf, is refused even while pairing")
    func refusals() async throws {
        let key = try Ed25519PrivateKey()
        let expired = try CertificateIssuer.issue(kind: .device, commonName: "kitchen", publicKey: key.publicKey, issuer: nil, signingKey: key,
                                                  notBefore: Date().addingTimeInterval(-2 * 86_400), notAfter: Date().addingTimeInterval(-86_400))
        guard case .failure(let error) = try await Self.memberReaches(key: key, certificate: expired) else {
            Issue.record("an expired certificate got through")
            return
        }
        #expect(error.code == .certificateRejected && error.reason.contains("expired"), "\(error)")
        let authority = try CertificateIssuer.issue(kind: .authority, commonName: "kitchen", publicKey: key.publicKey, issuer: nil, signingKey: key)
        guard case .failure = try await Self.memberReaches(key: key, certificate: authority) else {
            Issue.record("a CA certificate got through as a device")
            return
        }
    }
}
