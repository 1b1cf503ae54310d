import Foundation
import HearthIdentity
@testable import HearthTransport
import Logging
import NIOCore
import NIOEmbedded
import Testing

/// The TLS handler alone, on two `EmbeddedChannel`s joined by the test: no sockets, no event
/// loop threads, time moved by hand. Every byte between the two ends passes through the test,
/// so it can check what a refused peer receives and what the wire carries.
extension TransportTests {
    @Suite("TLS handler on EmbeddedChannel")
    struct TLSHandlerEmbeddedTests {
        @Test("Two devices of the account: both learn the other's device ID, and data flows encrypted both ways")
        func handshakeAndData() throws {
            let household = try Household()
            let pair = try EmbeddedPair(client: household.laptop, server: household.server, expecting: household.server.deviceID)
            try pair.shuttle()
            #expect(pair.client.peer?.deviceID == household.server.deviceID)
            #expect(pair.server.peer?.deviceID == household.laptop.deviceID)

            let secret = "the shopping list: oat milk, lentils"
            try pair.client.channel.writeAndFlush(ByteBuffer(string: secret)).wait()
            let wire = try pair.shuttle()
            #expect(!wire.contains(Array(secret.utf8)), "plaintext on the wire")
            #expect(pair.server.received == secret)

            try pair.server.channel.writeAndFlush(ByteBuffer(string: "ok")).wait()
            try pair.shuttle()
            #expect(pair.client.received == "ok")
        }

        @Test("A device of another account is refused, and what the server wrote early never leaves it")
        func strangerGetsNothing() throws {
            let household = try Household()
            // The stranger trusts household A's CA, so it is the server that refuses it.
            let pair = try EmbeddedPair(client: household.stranger, server: household.server,
                                        clientTrusts: household.server.account.caCertificate)
            // Written before the handshake: held until it completes, so never sent here.
            let welcome = "WELCOME-TO-HOUSEHOLD-A"
            pair.server.channel.writeAndFlush(ByteBuffer(string: welcome), promise: nil)
            let wire = try pair.shuttle()
            #expect(!wire.contains(Array(welcome.utf8)))
            #expect(pair.server.peer == nil)
            #expect(pair.server.errors.contains { ($0 as? TLSError)?.code == .certificateRejected })
            #expect(!pair.server.channel.isActive, "the server closes the refused connection")
            // In TLS 1.3 the client is done once it sent its Finished; the server's verdict
            // arrives as its first read, an alert that closes it too.
            #expect(pair.client.errors.contains { $0 is TLSError })
            #expect(!pair.client.channel.isActive)
            #expect(pair.client.received.isEmpty && pair.server.received.isEmpty)
        }

        @Test("A client dialling one device of the account refuses another (unexpectedPeer)")
        func unexpectedPeer() throws {
            let household = try Household()
            let pair = try EmbeddedPair(client: household.laptop, server: household.server, expecting: household.laptop.deviceID)
            try pair.shuttle()
            #expect(pair.client.peer == nil)
            #expect(pair.client.errors.contains { ($0 as? TLSError)?.code == .unexpectedPeer })
            #expect(!pair.client.channel.isActive)
        }

        @Test("A peer that never answers fails the handshake at its timeout, not before")
        func handshakeTimeout() throws {
            let household = try Household()
            let pair = try EmbeddedPair(client: household.laptop, server: household.server, handshakeTimeout: .seconds(10))
            // The client's hello is never delivered.
            _ = try pair.client.channel.readOutbound(as: ByteBuffer.self)
            pair.client.channel.embeddedEventLoop.advanceTime(by: .seconds(9))
            #expect(pair.client.errors.isEmpty && pair.client.channel.isActive)
            pair.client.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
            #expect(pair.client.errors.contains { ($0 as? TLSError)?.code == .handshakeTimeout })
            #expect(!pair.client.channel.isActive)
        }

        @Test("close sends close_notify: the other end sees a clean end; a cut connection is reported as unclean")
        func cleanAndUncleanEnds() throws {
            let household = try Household()
            let clean = try EmbeddedPair(client: household.laptop, server: household.server)
            try clean.shuttle()
            clean.client.channel.close(promise: nil)
            try clean.shuttle()
            #expect(!clean.server.channel.isActive)
            #expect(!clean.server.errors.contains { ($0 as? TLSError)?.code == .uncleanShutdown })

            let cut = try EmbeddedPair(client: household.laptop, server: household.server)
            try cut.shuttle()
            // The transport ends under the server without a close_notify.
            cut.server.channel.pipeline.fireChannelInactive()
            #expect(cut.server.errors.contains { ($0 as? TLSError)?.code == .uncleanShutdown })
        }
    }
}

/// Records what a TLS handler passes up: the handshake event, plaintext, errors.
private final class Recorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    var peer: TLSPeer?
    var received = ""
    var errors: [any Error] = []

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let peer)? = event as? TLSEvent { self.peer = peer }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received += String(buffer: unwrapInboundIn(data))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        errors.append(error)
    }
}

/// One end: an embedded channel with a TLS handler and a recorder above it.
private struct End {
    let channel: EmbeddedChannel
    let recorder: Recorder

    var peer: TLSPeer? { recorder.peer }
    var received: String { recorder.received }
    var errors: [any Error] { recorder.errors }

    init(identity: DeviceIdentity, role: SSLContext.Role, expecting: DeviceID?, trusting anchor: Certificate?,
         handshakeTimeout: TimeAmount) throws {
        let configuration = TLSConfiguration(identity: identity, trustAnchor: anchor, handshakeTimeout: handshakeTimeout,
                                             logger: Logger(label: "test.tls.\(role)"))
        let context = try SSLContext(configuration: configuration, role: role)
        recorder = Recorder()
        channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(TLSHandler(context: context, expectedPeer: expecting))
        try channel.pipeline.syncOperations.addHandler(recorder)
        // Active, as an accepted or connected socket would be: the client sends its hello.
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 7000)).wait()
    }
}

/// A client and a server joined by the test, which carries their bytes in both directions.
private struct EmbeddedPair {
    let client: End
    let server: End

    init(client: DeviceIdentity, server: DeviceIdentity, expecting: DeviceID? = nil, clientTrusts anchor: Certificate? = nil,
         handshakeTimeout: TimeAmount = .seconds(10)) throws {
        self.server = try End(identity: server, role: .server, expecting: nil, trusting: nil, handshakeTimeout: handshakeTimeout)
        self.client = try End(identity: client, role: .client, expecting: expecting, trusting: anchor,
                              handshakeTimeout: handshakeTimeout)
    }

    /// Carries bytes each way until neither end has more to send (or one closed); returns
    /// every byte carried, in order.
    @discardableResult
    func shuttle() throws -> [UInt8] {
        var wire: [UInt8] = []
        var moved = true
        while moved {
            moved = false
            for (from, to) in [(client.channel, server.channel), (server.channel, client.channel)] {
                while let buffer = try from.readOutbound(as: ByteBuffer.self) {
                    wire += Array(buffer.readableBytesView)
                    moved = true
                    guard to.isActive else { continue }
                    try to.writeInbound(buffer)
                }
            }
        }
        return wire
    }
}

private extension Array where Element == UInt8 {
    func contains(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        return (0...(count - needle.count)).contains { Array(self[$0..<$0 + needle.count]) == needle }
    }
}
