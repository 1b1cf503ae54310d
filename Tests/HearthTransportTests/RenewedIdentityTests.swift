import Foundation
import HearthIdentity
@testable import HearthTransport
import HearthTestSupport
import HearthTesting
import Testing

extension TransportTests {
    /// What only the TLS handshake shows of certificate renewal (the renewal itself, between
    /// engines, is `CertificateRenewalTests`, on the in-memory network): a listener whose
    /// identity was replaced presents the renewed certificate to the next client, which accepts it.
    @Suite("Renewed identity in the handshake")
    struct RenewedIdentityTests {
        @Test("After replaceIdentity, the listener presents the renewed certificate (same key, same device) in the next handshake")
        func presentsRenewedCertificate() async throws {
            try await withCleanup { cleanup in
                let home = try Household()
                let server = try PeerTransport(configuration: TLSConfiguration(identity: home.server, logger: LogCapture().logger("server")))
                let listener = try await server.listen(host: "127.0.0.1", port: 0)
                cleanup { await listener.close() }
                let accepting = Task { for await connection in listener.connections { await connection.close() } }
                cleanup { accepting.cancel() }
                let port = try #require(listener.port)

                let before = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: port)
                #expect(before.peer.certificate.derEncoded == home.server.certificate.derEncoded)
                await before.close()

                let later = Date().addingTimeInterval(400 * 86_400)
                let certificate = try home.authority.issueDeviceCertificate(for: home.server.privateKey.publicKey, deviceName: "server",
                                                                            notBefore: Date().addingTimeInterval(-3600), notAfter: later)
                let renewed = try DeviceIdentity(account: home.authority.account, privateKey: home.server.privateKey, certificate: certificate)
                try server.replaceIdentity(renewed)

                let after = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: port, expecting: home.server.deviceID)
                #expect(after.peer.deviceID == home.server.deviceID, "the same key, so the same device ID")
                #expect(after.peer.certificate.derEncoded == certificate.derEncoded)
                #expect(after.peer.certificate.notValidAfter > Date().addingTimeInterval(399 * 86_400))
                await after.close()
            }
        }
    }
}
