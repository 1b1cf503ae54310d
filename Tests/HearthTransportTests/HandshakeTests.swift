import Foundation
import HearthIdentity
@testable import HearthTransport
import HearthTestSupport
import HearthTesting
import NIOCore
import Testing

extension TransportTests {
    /// Who gets in: two devices of one account do; everything else is refused with a
    /// logged reason and never receives a byte of application data.
    @Suite("Handshake")
    struct HandshakeTests {
        @Test("Two devices of one account connect, learn each other's device ID, and exchange frames")
        func sameAccount() async throws {
            try await withCleanup { cleanup in
                let home = try Household()
                let server = try await EchoServer(identity: home.server)
                cleanup { await server.stop() }
                let connection = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port)
                #expect(connection.peer.deviceID == home.server.deviceID)
                #expect(connection.peer.certificate.commonName == "server")
                let echoed = try await connection.executeThenClose { inbound, outbound in
                    var frames = inbound.makeAsyncIterator()
                    let hello = try await frames.next().map { String(buffer: $0) }
                    try await outbound.write(ByteBuffer(string: "ping"))
                    let echo = try await frames.next().map { String(buffer: $0) }
                    return [hello, echo]
                }
                #expect(echoed == [greeting, "ping"])
                let outcomes = await server.waitForOutcomes(1)
                #expect(outcomes.first?.0 == home.laptop.deviceID)  // the server learned the client's ID
                #expect(outcomes.first?.1 == nil)  // ended by close_notify, cleanly
                await server.stop()
            }
        }

        @Test("Dialling a specific device refuses a different device of the same account")
        func expectedPeer() async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let error = await #expect(throws: TLSError.self) {
                _ = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port, expecting: home.laptop.deviceID)
            }
            #expect(error?.code == .unexpectedPeer)
            let right = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port, expecting: home.server.deviceID)
            await right.close()
            await server.stop()
        }

        /// Connects a Hearth client with `identity`, trusting account A's CA (what an
        /// attacker would do: the CA certificate is public), and checks the refusal.
        func expectRefused(_ identity: DeviceIdentity, trusting anchor: Certificate, serverReason: String,
                           home: Household) async throws {
            let server = try await EchoServer(identity: home.server)
            let clientLogs = LogCapture()
            var frames: [String] = []
            do {
                let connection = try await clientTransport(identity, trustAnchor: anchor, logs: clientLogs)
                    .connect(host: "127.0.0.1", port: server.port)
                // TLS 1.3: the client may finish first; the server's refusal then arrives
                // as an alert instead of the first frame.
                let result = await drain(connection)
                frames = result.frames
                #expect(result.error != nil, "the refused client's stream must fail, not end quietly")
                #expect(!(result.error is TimeoutError))
            } catch {
                #expect(error is TLSError)
            }
            #expect(frames.isEmpty, "a refused client received \(frames)")
            let logged = await server.logs.waitFor(serverReason)
            #expect(logged != nil, "server log should give the reason \"\(serverReason)\": \(server.logs.all.map(\.text))")
            #expect(logged?.message == "TLS connection refused")
            #expect(server.state.outcomes.withLock { $0.isEmpty }, "no connection may reach the application")
            await server.stop()
        }

        @Test("A device of another account is refused")
        func otherAccount() async throws {
            let home = try Household()
            try await expectRefused(home.stranger, trusting: home.authority.account.caCertificate,
                                    serverReason: "unable to get local issuer certificate", home: home)
        }

        @Test("A device of another account trusting its own CA refuses the server, and still gets nothing")
        func otherAccountBothWays() async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let error = await #expect(throws: TLSError.self) {
                _ = try await clientTransport(home.stranger).connect(host: "127.0.0.1", port: server.port)
            }
            #expect(error?.code == .certificateRejected)
            #expect(error?.reason.contains("unable to get local issuer certificate") == true, "\(String(describing: error))")
            #expect(await server.logs.waitFor("unknown ca") != nil)
            #expect(server.state.outcomes.withLock { $0.isEmpty })
            await server.stop()
        }

        @Test("A self-signed device certificate is refused")
        func selfSigned() async throws {
            let home = try Household()
            let key = try Ed25519PrivateKey()
            let certificate = try CertificateIssuer.issue(kind: .device, commonName: "rogue", organization: home.authority.account.id.hex,
                                                          publicKey: key.publicKey, issuer: nil, signingKey: key)
            let rogue = try DeviceIdentity(account: home.laptop.account, privateKey: key, certificate: certificate)
            try await expectRefused(rogue, trusting: home.authority.account.caCertificate,
                                    serverReason: "self-signed certificate", home: home)
        }

        @Test("An expired device certificate is refused")
        func expired() async throws {
            let home = try Household()
            let now = Date()
            let old = try home.authority.makeDevice(named: "old", notBefore: now.addingTimeInterval(-2 * 86_400),
                                                    notAfter: now.addingTimeInterval(-86_400))
            try await expectRefused(old, trusting: home.authority.account.caCertificate,
                                    serverReason: "certificate has expired", home: home)
        }

        @Test("A not-yet-valid device certificate is refused")
        func notYetValid() async throws {
            let home = try Household()
            let now = Date()
            let future = try home.authority.makeDevice(named: "future", notBefore: now.addingTimeInterval(86_400),
                                                       notAfter: now.addingTimeInterval(2 * 86_400))
            try await expectRefused(future, trusting: home.authority.account.caCertificate,
                                    serverReason: "certificate is not yet valid", home: home)
        }

        @Test("The account CA certificate cannot stand in for a device")
        func caAsDevice() async throws {
            let home = try Household()
            let impostor = try DeviceIdentity(account: home.authority.account, privateKey: home.authority.privateKey,
                                              certificate: home.authority.account.caCertificate)
            try await expectRefused(impostor, trusting: home.authority.account.caCertificate,
                                    serverReason: "unsuitable certificate purpose", home: home)
        }

        @Test("A plain TCP client is refused and receives no application data")
        func plainTCP() async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let port = server.port
            let (received, sawEOF) = try await onThread {
                Result { try plainTCPExchange(port: port, send: Array("GET / HTTP/1.1\r\nHost: hearth\r\n\r\n".utf8)) }
            }.get()
            #expect(sawEOF, "the server must close the connection")
            #expect(!String(decoding: received, as: UTF8.self).contains(greeting))
            // At most a TLS alert record (content type 21), never application data (23).
            #expect(received.isEmpty || received.first == 21, "received \(received)")
            #expect(await server.logs.waitFor("TLS connection refused") != nil)
            #expect(server.state.outcomes.withLock { $0.isEmpty })
            await server.stop()
        }

        @Test("A client that connects and says nothing is dropped after the handshake timeout")
        func silentClient() async throws {
            let home = try Household()
            let logs = LogCapture()
            let transport = try PeerTransport(configuration: TLSConfiguration(identity: home.server, handshakeTimeout: .milliseconds(300),
                                                                              logger: logs.logger("server")))
            let listener = try await transport.listen(host: "127.0.0.1", port: 0)
            let port = listener.port!
            let start = ContinuousClock.now
            let (received, sawEOF) = try await onThread { Result { try plainTCPExchange(port: port, send: []) } }.get()
            #expect(sawEOF)
            #expect(received.isEmpty)
            #expect(ContinuousClock.now - start < .seconds(4))
            #expect(await logs.waitFor("handshakeTimeout") != nil)
            await listener.close()
        }

        /// Runs `openssl s_client` against a fresh echo server of the household, as the laptop
        /// (presenting its certificate unless `presentingCertificate` is false), trusting the
        /// account CA; `options` come after `-connect`. The caller stops the server.
        func sClient(_ options: [String], presentingCertificate: Bool = true,
                     holdStdin: Duration = .seconds(2)) async throws -> (output: String, status: Int32, server: EchoServer) {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let files = try PEMFiles(home.laptop)
            defer { files.remove() }
            let credentials = presentingCertificate ? ["-cert", files.certificate.path, "-key", files.key.path] : []
            let (output, status) = try await runOpenSSL(
                ["s_client", "-connect", "127.0.0.1:\(server.port)"] + options + credentials + ["-CAfile", files.ca.path],
                holdStdin: holdStdin)
            return (output, status, server)
        }

        @Test("A TLS 1.2-only client (openssl s_client -tls1_2, with a valid device certificate) is refused")
        func tls12() async throws {
            let (output, status, server) = try await sClient(["-tls1_2", "-alpn", "hearth/1"])
            #expect(status != 0)
            #expect(!output.contains(greeting))
            #expect(await server.logs.waitFor("unsupported protocol") != nil, "\(server.logs.all.map(\.text))")
            #expect(server.state.outcomes.withLock { $0.isEmpty })
            await server.stop()
        }

        @Test("openssl s_client without a client certificate gets no application data")
        func sClientWithoutCertificate() async throws {
            let (output, _, server) = try await sClient(["-tls1_3", "-alpn", "hearth/1"], presentingCertificate: false)
            // s_client got as far as seeing the server's certificate…
            #expect(output.contains("server"), "\(output)")
            // …but not a byte of application data.
            #expect(!output.contains(greeting), "\(output)")
            #expect(await server.logs.waitFor("peer did not return a certificate") != nil, "\(server.logs.all.map(\.text))")
            #expect(server.state.outcomes.withLock { $0.isEmpty })
            await server.stop()
        }

        @Test("Control: openssl s_client WITH a device certificate of the account does get the greeting")
        func sClientWithCertificate() async throws {
            // s_client leaves when stdin closes: give a loaded machine time.
            let (output, _, server) = try await sClient(["-tls1_3", "-alpn", "hearth/1"], holdStdin: .seconds(3))
            #expect(output.contains(greeting), "\(output)")
            await server.stop()
        }

        @Test("A client offering another ALPN protocol is refused")
        func wrongALPN() async throws {
            let (output, _, server) = try await sClient(["-tls1_3", "-alpn", "http/1.1"], holdStdin: .seconds(1))
            #expect(!output.contains(greeting))
            #expect(await server.logs.waitFor("TLS connection refused") != nil)
            #expect(server.state.outcomes.withLock { $0.isEmpty })
            await server.stop()
        }
    }
}
