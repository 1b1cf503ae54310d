import Foundation
import HearthCore
import HearthIdentity
@testable import HearthTransport
import HearthTesting
import Logging
import NIOCore
import Testing

extension TransportTests {
    /// Issue 26, "Run as users run it": the options a peer socket really has, and what a
    /// connection that fails for a cause on this machine leaves in the log.
    @Suite("Peer sockets as an ordinary user")
    struct UnprivilegedSocketTests {
        /// Read back with getsockopt (NIO's getOption on a socket channel asks the kernel).
        static let tcpNoDelay = ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_NODELAY))
        static let soDebug = ChannelOptions.Types.SocketOption(level: .socket, name: .init(rawValue: SO_DEBUG))

        @Test("Both ends of a live peer connection have TCP_NODELAY set and SO_DEBUG not set")
        func effectiveSocketOptions() async throws {
            // Before c04ad9c the transport set option 1 at SOL_SOCKET, which is SO_DEBUG: as root
            // this finds SO_DEBUG on (TCP_NODELAY was on all along: NIO's bootstraps set it by
            // default); as any other user no connection is made at all.
            let home = try Household()
            let listener = try await clientTransport(home.server).listen(host: "127.0.0.1", port: 0)
            let dialled = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: try #require(listener.port))
            var incoming = listener.connections.makeAsyncIterator()
            let accepted = try #require(await incoming.next())
            for (side, connection) in [("dialled", dialled), ("accepted", accepted)] {
                let channel = connection.channel.channel
                let noDelay = try await channel.getOption(Self.tcpNoDelay).get()
                let debug = try await channel.getOption(Self.soDebug).get()
                #expect(noDelay != 0, "\(side) side: TCP_NODELAY is off, so Nagle holds back small frames")
                #expect(debug == 0, "\(side) side: SO_DEBUG is on (a socket-level option was set where a TCP one was meant)")
            }
            await dialled.close()
            await accepted.close()
            await listener.close()
        }

        @Test("Causes on this machine are told apart from the peer's and the network's")
        func classification() {
            for code in [EACCES, EPERM, EMFILE, ENFILE, ENOBUFS, ENOMEM] {
                #expect(LocalFailure.cause(of: IOError(errnoCode: code, reason: "setsockopt")) != nil, "errno \(code)")
            }
            #expect(LocalFailure.cause(of: IOError(errnoCode: EACCES, reason: "setsockopt")) == "EACCES (Permission denied)")
            for code in [ECONNREFUSED, ECONNRESET, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH, EADDRINUSE, EPIPE] {
                #expect(LocalFailure.cause(of: IOError(errnoCode: code, reason: "connect")) == nil, "errno \(code)")
            }
            #expect(LocalFailure.cause(of: ChannelError.connectTimeout(.seconds(10))) == nil)
            #expect(LocalFailure.cause(of: ChannelError.eof) == nil)
            #expect(LocalFailure.cause(of: CancellationError()) == nil)
        }

        @Test("A dial that fails for a local cause is logged at error once, however often it is retried")
        func dialFailureLoggedOnce() async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let logs = LogCapture()
            var client = try clientTransport(home.laptop, logs: logs)
            client.channelSetupHook = { throw IOError(errnoCode: EACCES, reason: "setsockopt") }
            for _ in 0..<3 {
                await #expect(throws: (any Error).self) { try await client.connect(host: "127.0.0.1", port: server.port) }
            }
            // Reported in connect's own catch, before it throws: no waiting.
            #expect(client.localFailures.occurrences("dial") == 3)
            let errors = logs.all.filter { $0.level == .error }
            #expect(errors.count == 1, "\(errors.map(\.text))")
            #expect(errors.first?.message.contains("cannot dial peer connections: EACCES (Permission denied)") == true)
            await server.stop()
        }

        @Test("An accepted connection that cannot be set up for a local cause is logged at error once, however many peers try")
        func acceptFailureLoggedOnce() async throws {
            let home = try Household()
            let logs = LogCapture()
            var server = try PeerTransport(configuration: TLSConfiguration(identity: home.server, logger: logs.logger("server")))
            server.channelSetupHook = { throw IOError(errnoCode: EACCES, reason: "setsockopt") }
            let listener = try await server.listen(host: "127.0.0.1", port: 0)
            let client = try clientTransport(home.laptop)
            for _ in 0..<3 {
                // NIO resets the connection it could not set up: the handshake never completes.
                await #expect(throws: (any Error).self) { try await client.connect(host: "127.0.0.1", port: try #require(listener.port)) }
            }
            // The reset may reach the client before the error has gone down the listener's
            // pipeline: wait until all three were counted, woken at each count.
            let failures = server.localFailures
            _ = await ChangeSignal.waitUntil(ContinuousClock.now + .seconds(30), observing: { [failures.changes] }) {
                failures.occurrences("accept") >= 3
            }
            #expect(server.localFailures.occurrences("accept") == 3)
            let errors = logs.all.filter { $0.level == .error }
            #expect(errors.count == 1, "\(errors.map(\.text))")
            #expect(errors.first?.message.contains("cannot accept peer connections: EACCES (Permission denied)") == true)
            await listener.close()
        }
    }
}
