import Foundation
import HearthIdentity
@testable import HearthTransport
import NIOCore
import Testing

extension TransportTests {
    /// Frames over a real TLS connection on 127.0.0.1.
    @Suite("Frames over TLS")
    struct FrameTests {
        /// `count` bytes of a pattern that does not repeat every 256 bytes, so that a
        /// misplaced or dropped chunk shows.
        static func payload(_ count: Int, seed: UInt32 = 7) -> ByteBuffer {
            let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                var x = seed
                for i in 0..<count {
                    x = x &* 1_664_525 &+ 1_013_904_223
                    buffer[i] = UInt8(truncatingIfNeeded: x >> 24)
                }
                initialized = count
            }
            return ByteBuffer(bytes: bytes)
        }

        @Test("Frames of 1 byte, 1 MiB and exactly the cap round-trip",
              arguments: [1, 1 << 20, Frame.maximumLength])
        func roundTrip(size: Int) async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let connection = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port)
            let sent = Self.payload(size)
            let echoed = try await connection.executeThenClose { inbound, outbound in
                var frames = inbound.makeAsyncIterator()
                _ = try await frames.next()  // greeting
                try await outbound.write(sent)
                return try await frames.next()
            }
            #expect(echoed?.readableBytes == size)
            #expect(echoed == sent)
            await server.stop()
        }

        @Test("A frame of cap + 1 bytes is refused by the receiver before it is collected, and closes the connection")
        func overCap() async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            // A sender whose own cap is one byte larger, so the receiver's check is what runs.
            let connection = try await clientTransport(home.laptop, maximumFrameLength: Frame.maximumLength + 1)
                .connect(host: "127.0.0.1", port: server.port)
            let (frames, error): ([Int], (any Error)?) = await withTimeout(.seconds(10)) { () async -> ([Int], (any Error)?) in
                var frames: [Int] = []
                do {
                    try await connection.executeThenClose { inbound, outbound in
                        try await outbound.write(Self.payload(Frame.maximumLength + 1))
                        for try await frame in inbound { frames.append(frame.readableBytes) }
                    }
                    return (frames, nil)
                } catch {
                    return (frames, error)
                }
            } ?? ([], TimeoutError())
            #expect(!(error is TimeoutError), "the client must learn of the close, not hang")
            // At most the greeting (the server may close before flushing it), never an echo.
            #expect(frames.allSatisfy { $0 == greeting.utf8.count } && frames.count <= 1, "\(frames)")
            let outcomes = await server.waitForOutcomes(1)
            // The server's session ends in error: usually the frame error itself, but when the
            // close beats the server's own greeting write, that write's error comes first. The
            // log line is where the reason is always given.
            #expect(outcomes.count == 1 && outcomes[0].1 != nil, "\(outcomes)")
            let logged = await server.logs.waitFor("length 4194305 is over the cap of 4194304 bytes")
            #expect(logged?.metadata["code"] == "tooLarge")
            #expect(server.state.framesReceived.withLock { $0 } == 0)
            await server.stop()
        }

        @Test("The sender refuses to send an over-cap or empty frame, and its stream reports why",
              arguments: [Frame.maximumLength + 1, 0])
        func senderCap(size: Int) async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let connection = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port)
            let error = await #expect(throws: FrameError.self) {
                try await connection.executeThenClose { inbound, outbound in
                    try await outbound.write(Self.payload(size))
                    for try await _ in inbound {}
                }
            }
            #expect(error?.code == (size == 0 ? .zeroLength : .tooLarge))
            #expect(server.state.framesReceived.withLock { $0 } == 0)
            await server.stop()
        }

        @Test("Hundreds of pipelined frames arrive in order")
        func pipelined() async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let connection = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port)
            let count = 500
            let received = try await connection.executeThenClose { inbound, outbound in
                // All written before any is read back.
                try await outbound.write(contentsOf: (0..<count).map { ByteBuffer(string: "frame \($0) " + String(repeating: "x", count: $0)) })
                var received: [String] = []
                for try await frame in inbound {
                    received.append(String(buffer: frame))
                    if received.count == count + 1 { break }
                }
                return received
            }
            #expect(received.first == greeting)
            #expect(Array(received.dropFirst()) == (0..<count).map { "frame \($0) " + String(repeating: "x", count: $0) })
            await server.stop()
        }

        /// Splits raw bytes received by a client in raw mode into frame payloads.
        static func parseFrames(_ bytes: [UInt8]) -> [[UInt8]] {
            var frames: [[UInt8]] = []
            var i = 0
            while i + 4 <= bytes.count {
                let length = bytes[i..<i + 4].reduce(0) { $0 << 8 | Int($1) }
                guard i + 4 + length <= bytes.count else { break }
                frames.append(Array(bytes[i + 4..<i + 4 + length]))
                i += 4 + length
            }
            return frames
        }

        static func frame(_ payload: [UInt8]) -> [UInt8] {
            withUnsafeBytes(of: UInt32(payload.count).bigEndian, Array.init) + payload
        }

        @Test("A frame written one byte at a time, every TLS record sent in 1-byte TCP writes, arrives whole")
        func oneByteWrites() async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let transport = try clientTransport(home.laptop)
            // Raw mode: the test frames by hand; OneByteWriter below TLS cuts the ciphertext.
            let connection = try await transport.connect(host: "127.0.0.1", port: server.port, expecting: nil, framing: false,
                                                         socketHandlers: { [OneByteWriter()] })
            let payload = Array("a frame that crosses many records and many segments".utf8)
            let frames = try await connection.executeThenClose { inbound, outbound in
                for byte in Self.frame(payload) {
                    try await outbound.write(ByteBuffer(bytes: [byte]))  // one TLS record per byte
                }
                var bytes: [UInt8] = []
                for try await chunk in inbound {
                    bytes += Array(chunk.readableBytesView)
                    if Self.parseFrames(bytes).count == 2 { break }
                }
                return Self.parseFrames(bytes)
            }
            #expect(frames.count == 2)
            #expect(frames.first == Array(greeting.utf8))
            #expect(frames.last == payload)
            #expect(server.state.framesReceived.withLock { $0 } == 1)
            await server.stop()
        }

        @Test("A peer closing (with close_notify) in the middle of a frame is reported as truncated")
        func closeMidFrame() async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let connection = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port, expecting: nil,
                                                                            framing: false, socketHandlers: { [] })
            try await connection.executeThenClose { _, outbound in
                try await outbound.write(ByteBuffer(bytes: [0, 0, 3, 232] + Array(repeating: 0x41, count: 10)))  // claims 1000, sends 10
            }
            let outcomes = await server.waitForOutcomes(1)
            #expect(outcomes.count == 1, "the server's reader must finish, not hang")
            // The serving task fails: with the truncated frame from its inbound stream, or,
            // if the close won the race with its greeting, with the failed write.
            #expect(outcomes.first?.1 != nil)
            let logged = await server.logs.waitFor("the stream ended after 10 of 1000 payload bytes")
            #expect(logged?.message == "closing connection: bad frame")
            #expect(logged?.metadata["code"] == "truncated")
            await server.stop()
        }

        @Test("A peer vanishing without close_notify in the middle of a frame is reported")
        func uncleanMidFrame() async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let connection = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port, expecting: nil,
                                                                            framing: false, socketHandlers: { [Cutter()] })
            let channel = connection.channel.channel
            try await connection.executeThenClose { inbound, outbound in
                // Take the server's greeting first: otherwise its write may race the cut, and the
                // server then ends on the failed write instead of on the missing close_notify.
                var received = inbound.makeAsyncIterator()
                _ = try await received.next()
                try await outbound.write(ByteBuffer(bytes: [0, 0, 3, 232] + Array(repeating: 0x41, count: 10)))
                try await channel.triggerUserOutboundEvent(Cutter.Cut())
            }  // closing now sends close_notify into the Cutter: the server sees a bare FIN
            let outcomes = await server.waitForOutcomes(1)
            #expect(outcomes.count == 1, "the server's reader must finish, not hang")
            #expect(outcomes.first?.1 != nil, "the end without close_notify must surface as an error")
            #expect(await server.logs.waitFor("without close_notify") != nil)
            #expect(await server.logs.waitFor("the stream ended after 10 of 1000 payload bytes") != nil)
            await server.stop()
        }

        @Test("Zero-length and garbage frames inside TLS close the connection with a logged reason",
              arguments: [
                  ([0, 0, 0, 0], "a frame of length 0"),
                  (Array("GET / HTTP/1.1\r\n\r\n".utf8), "length 1195725856 is over the cap"),
                  ([0xff, 0xff, 0xff, 0xff, 1, 2, 3], "length 4294967295 is over the cap"),
              ] as [([UInt8], String)])
        func badFrames(bytes: [UInt8], reason: String) async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let connection = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: server.port, expecting: nil,
                                                                            framing: false, socketHandlers: { [] })
            let result = await withTimeout(.seconds(10)) {
                try? await connection.executeThenClose { inbound, outbound in
                    try await outbound.write(ByteBuffer(bytes: bytes))
                    try await outbound.write(ByteBuffer(bytes: Self.frame(Array("after".utf8))))
                    var received: [UInt8] = []
                    for try await chunk in inbound { received += Array(chunk.readableBytesView) }
                    return received
                }
            }
            // The connection ended (no hang), and nothing after the bad frame was echoed.
            #expect(result != nil)
            if let received = result ?? nil {
                // At most the greeting (the server may close before it is flushed).
                #expect(Self.parseFrames(received).allSatisfy { $0 == Array(greeting.utf8) })
            }
            #expect(await server.logs.waitFor(reason) != nil, "\(server.logs.all.map(\.text))")
            #expect(server.state.framesReceived.withLock { $0 } == 0)
            await server.stop()
        }
    }
}
