import Foundation
import Logging
import HearthIdentity
@testable import HearthTransport
import HearthTesting
import NIOCore
import Testing

extension TransportTests {
    /// A device removed from the account (a CA-signed `DeviceRemoval`) is refused in the
    /// handshake whichever side dials, although its certificate still chains to the CA; it is
    /// told why (a `certificate_revoked` alert), and the refusal takes effect for the next
    /// handshake, without a restart.
    @Suite("Removed devices")
    struct RemovedDeviceHandshakeTests {
        @Test("A removed device dialling a member is refused with certificate_revoked, and learns it was removed")
        func removedClient() async throws {
            let home = try Household()
            let removals = DeviceRemovals(trust: home.authority.account.trust, logger: Logger(label: "test"))
            let server = try await EchoServer(identity: home.server, removals: removals)
            // Before the removal the laptop gets in (the control).
            let before = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port)
            #expect(await drain(before, frames: 1).frames == [greeting])
            removals.merge([try home.authority.removal(of: home.laptop.deviceID, named: "laptop")])
            // The next handshake: TLS 1.3 lets the client finish first, so the refusal arrives
            // as the first read, as an alert the client can tell from any other failure.
            var error: (any Error)?
            do {
                let connection = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port)
                let result = await drain(connection)
                #expect(result.frames.isEmpty, "a removed device received \(result.frames)")
                error = result.error
            } catch let caught {
                error = caught
            }
            let tls = try #require(error as? TLSError, "\(String(describing: error))")
            #expect(tls.code == .removedByPeer, "\(tls)")
            let logged = await server.logs.waitFor("removed from the account")
            #expect(logged?.message == "TLS connection refused", "\(server.logs.all.map(\.text))")
            #expect(server.state.outcomes.withLock { $0.count } == 1, "only the connection from before the removal reached the application")
            await server.stop()
        }

        @Test("Issue 26, point 7: a server with a removal notice lets a removed client finish the handshake only to hand it the notice (its signed record) and close; the application never sees it")
        func removedClientGetsTheRecord() async throws {
            let home = try Household()
            let removals = DeviceRemovals(trust: home.authority.account.trust, logger: Logger(label: "test"))
            removals.merge([try home.authority.removal(of: home.laptop.deviceID, named: "laptop")])
            let notice = "THE-SIGNED-RECORD"
            let server = try await EchoServer(identity: home.server, removals: removals, removalNotice: { device in
                removals.isRemoved(device) ? Frame.encode(Array(notice.utf8)) : nil
            })
            let connection = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port)
            let result = await drain(connection)
            #expect(result.frames == [notice], "\(result)")
            let logged = await server.logs.waitFor("sent it the signed removal record")
            #expect(logged?.message == "TLS connection refused", "\(server.logs.all.map(\.text))")
            #expect(server.state.outcomes.withLock { $0.count } == 0, "the removed device reached the application")
            await server.stop()
        }

        @Test("A member dialling a removed device refuses it (peerRemoved) before sending anything")
        func removedServer() async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let removals = DeviceRemovals(trust: home.authority.account.trust, logger: Logger(label: "test"))
            removals.merge([try home.authority.removal(of: home.server.deviceID, named: "server")])
            let transport = try PeerTransport(configuration: TLSConfiguration(identity: home.laptop, removals: removals, logger: Logger(label: "test")))
            let error = await #expect(throws: TLSError.self) {
                _ = try await transport.connect(host: "127.0.0.1", port: server.port)
            }
            #expect(error?.code == .peerRemoved, "\(String(describing: error))")
            #expect(server.state.outcomes.withLock { $0.isEmpty })
            await server.stop()
        }

        @Test("openssl s_client with a removed device's certificate gets the alert certificate revoked and no data")
        func sClientRemoved() async throws {
            let home = try Household()
            let removals = DeviceRemovals(trust: home.authority.account.trust, logger: Logger(label: "test"))
            removals.merge([try home.authority.removal(of: home.laptop.deviceID, named: "laptop")])
            let server = try await EchoServer(identity: home.server, removals: removals)
            let files = try PEMFiles(home.laptop)
            defer { files.remove() }
            let (output, _) = try await runOpenSSL(
                ["s_client", "-connect", "127.0.0.1:\(server.port)", "-tls1_3", "-alpn", "hearth/1",
                 "-cert", files.certificate.path, "-key", files.key.path, "-CAfile", files.ca.path],
                holdStdin: .seconds(2))
            #expect(output.contains("certificate revoked"), "\(output)")
            #expect(!output.contains(greeting), "\(output)")
            #expect(server.state.outcomes.withLock { $0.isEmpty })
            await server.stop()
        }

        @Test("A record that the account CA did not sign removes nobody")
        func forgedRecord() async throws {
            let home = try Household()
            let removals = DeviceRemovals(trust: home.authority.account.trust, logger: Logger(label: "test"))
            // Signed by another household's CA, and one with a flipped bit.
            let other = try AccountAuthority.create(displayName: "Other")
            let foreign = try other.removal(of: home.laptop.deviceID, named: "laptop")
            let genuine = try home.authority.removal(of: home.laptop.deviceID, named: "laptop")
            var bytes = [UInt8](genuine.signature)
            bytes[5] ^= 1
            let flipped = DeviceRemoval(account: genuine.account, device: genuine.device, deviceName: genuine.deviceName,
                                        removedAt: genuine.removedAt, signature: Data(bytes))
            let later = DeviceRemoval(account: genuine.account, device: genuine.device, deviceName: genuine.deviceName,
                                      removedAt: genuine.removedAt + 1, signature: genuine.signature)
            #expect(removals.merge([foreign, flipped, later]).isEmpty)
            #expect(!removals.isRemoved(home.laptop.deviceID))
            let server = try await EchoServer(identity: home.server, removals: removals)
            let connection = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port)
            #expect(await drain(connection, frames: 1).frames == [greeting])
            await server.stop()
        }
    }
}
