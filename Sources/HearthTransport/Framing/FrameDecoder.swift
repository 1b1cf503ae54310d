import NIOCore

/// The frame format: a 4-byte big-endian length, then that many bytes of payload.
package enum Frame {
    /// The hard cap on a payload: 4 MiB, comfortably above the 1 MB store quota plus
    /// the signatures and certificates a delta carries.
    package static let maximumLength = 4 * 1024 * 1024
    /// Bytes of the length prefix.
    package static let headerLength = 4

    /// `payload` as one frame's bytes (for what is written below the framing handler, such as
    /// ``TLSConfiguration/removalNotice``).
    package static func encode(_ payload: some Collection<UInt8>) -> [UInt8] {
        var frame = [UInt8]()
        frame.reserveCapacity(payload.count + headerLength)
        withUnsafeBytes(of: UInt32(payload.count).bigEndian) { frame.append(contentsOf: $0) }
        frame.append(contentsOf: payload)
        return frame
    }
}

/// Splits a byte stream into frames.
///
/// The length prefix is checked the moment its four bytes are in: zero or over the cap
/// throws at once, so nothing is ever allocated for a claimed size. A payload is only
/// collected as its bytes actually arrive. The stream ending inside a frame throws
/// ``FrameError/Code/truncated``.
package struct FrameDecoder: ByteToMessageDecoder {
    package typealias InboundOut = ByteBuffer

    package let maximumLength: Int

    package init(maximumLength: Int = Frame.maximumLength) {
        self.maximumLength = maximumLength
    }

    package mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let length = buffer.getInteger(at: buffer.readerIndex, endianness: .big, as: UInt32.self) else {
            return .needMoreData
        }
        guard length > 0 else {
            throw FrameError(code: .zeroLength, reason: "a frame of length 0")
        }
        guard Int(length) <= maximumLength else {
            throw FrameError.tooLarge(length, cap: maximumLength)
        }
        guard buffer.readableBytes >= Frame.headerLength + Int(length) else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: Frame.headerLength)
        let payload = buffer.readSlice(length: Int(length))!
        context.fireChannelRead(wrapInboundOut(payload))
        return .continue
    }

    package mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        if buffer.readableBytes > 0 {
            let claimed = buffer.getInteger(at: buffer.readerIndex, endianness: .big, as: UInt32.self)
            let have = max(0, buffer.readableBytes - Frame.headerLength)
            let reason = claimed.map { "the stream ended after \(have) of \($0) payload bytes" }
                ?? "the stream ended inside a length prefix"
            buffer.moveReaderIndex(to: buffer.writerIndex)
            throw FrameError(code: .truncated, reason: reason)
        }
        return .needMoreData
    }
}

/// Prefixes each outbound payload with its length.
///
/// A payload that is empty or over the cap is a bug of the sender. The write fails, and
/// because a stream writer may not look at each write's result, the error is also sent
/// up the pipeline, which closes the connection: a frame is never dropped silently.
package final class FrameEncoder: ChannelOutboundHandler, RemovableChannelHandler {
    package typealias OutboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    package let maximumLength: Int

    package init(maximumLength: Int = Frame.maximumLength) {
        self.maximumLength = maximumLength
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let payload = unwrapOutboundIn(data)
        let length = payload.readableBytes
        guard length > 0 else {
            refuse(FrameError(code: .zeroLength, reason: "refusing to send an empty frame"), context: context, promise: promise)
            return
        }
        guard length <= maximumLength else {
            refuse(FrameError(code: .tooLarge, reason: "refusing to send \(length) bytes, over the cap of \(maximumLength)"),
                   context: context, promise: promise)
            return
        }
        // Header and payload as two writes: no copy of a payload of up to 4 MiB.
        var header = context.channel.allocator.buffer(capacity: Frame.headerLength)
        header.writeInteger(UInt32(length), endianness: .big)
        context.write(wrapOutboundOut(header), promise: nil)
        context.write(wrapOutboundOut(payload), promise: promise)
    }

    private func refuse(_ error: FrameError, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        promise?.fail(error)
        context.fireErrorCaught(error)
    }
}

@available(*, unavailable)
extension FrameEncoder: Sendable {}
