import HearthTransport
import NIOCore
import NIOEmbedded
import Testing

/// The frame decoder alone, on an embedded channel: exact control over how bytes arrive.
@Suite("Frame decoder")
struct FrameDecoderTests {
    func channel(cap: Int = Frame.maximumLength) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder(maximumLength: cap)))
        return channel
    }

    func frame(_ payload: [UInt8]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(payload.count), endianness: .big)
        buffer.writeBytes(payload)
        return buffer
    }

    @Test("Byte by byte, a frame comes out whole and only once complete")
    func byteByByte() throws {
        let channel = try channel()
        var input = frame(Array(0..<200))
        while input.readableBytes > 1 {
            try channel.writeInbound(input.readSlice(length: 1)!)
            #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        }
        try channel.writeInbound(input)
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(bytes: Array(0..<200)))
        #expect(try channel.finish().isClean)
    }

    @Test("Many frames in one read come out in order")
    func many() throws {
        let channel = try channel()
        var input = ByteBuffer()
        for i in 0..<300 { var f = frame(Array(repeating: UInt8(i % 256), count: i + 1)); input.writeBuffer(&f) }
        try channel.writeInbound(input)
        for i in 0..<300 {
            #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(bytes: Array(repeating: UInt8(i % 256), count: i + 1)))
        }
        _ = try channel.finish()
    }

    @Test("An over-cap length is refused from its four header bytes, before any payload arrives")
    func overCapHeaderOnly() throws {
        let channel = try channel(cap: 1024)
        let error = #expect(throws: FrameError.self) {
            try channel.writeInbound(ByteBuffer(bytes: [0, 0, 4, 1]))  // claims 1025
        }
        #expect(error?.code == .tooLarge)
        _ = try? channel.finish()
    }

    @Test("Exactly the cap is accepted")
    func exactlyCap() throws {
        let channel = try channel(cap: 1024)
        try channel.writeInbound(frame(Array(repeating: 1, count: 1024)))
        #expect(try channel.readInbound(as: ByteBuffer.self)?.readableBytes == 1024)
        _ = try channel.finish()
    }

    @Test("Zero length is refused")
    func zero() throws {
        let channel = try channel()
        let error = #expect(throws: FrameError.self) { try channel.writeInbound(ByteBuffer(bytes: [0, 0, 0, 0, 9])) }
        #expect(error?.code == .zeroLength)
        _ = try? channel.finish()
    }

    @Test("End of stream inside a frame is reported as truncated")
    func truncated() throws {
        let channel = try channel()
        try channel.writeInbound(ByteBuffer(bytes: [0, 0, 0, 10, 1, 2, 3]))
        let error = #expect(throws: FrameError.self) { _ = try channel.finish() }
        #expect(error?.code == .truncated)
        #expect(error?.reason == "the stream ended after 3 of 10 payload bytes")
    }
}
