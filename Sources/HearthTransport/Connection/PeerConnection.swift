import NIOCore

/// An authenticated connection to another device of the account: a stream of frames in,
/// a writer of frames out.
///
/// Inbound elements are frame payloads (without the length prefix); outbound elements
/// are payloads to frame. The inbound stream ends when the peer closes cleanly and throws
/// when the connection fails (``TLSError``, ``FrameError``): it never just hangs. Use it
/// inside ``executeThenClose(_:)`` so the connection is closed when done.
package struct PeerConnection: Sendable {
    /// The peer, verified against the account CA during the handshake.
    package let peer: TLSPeer
    package let remoteAddress: SocketAddress?
    /// The underlying NIO channel, wrapped for structured concurrency.
    package let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>

    /// Runs `body` with the inbound frames and the outbound writer, then closes.
    package func executeThenClose<Result>(
        _ body: (_ inbound: NIOAsyncChannelInboundStream<ByteBuffer>, _ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws -> Result
    ) async throws -> Result {
        try await channel.executeThenClose { inbound, outbound in try await body(inbound, outbound) }
    }

    /// Closes without reading or writing (for connections the caller decides not to use).
    package func close() async {
        try? await channel.channel.close()
    }
}
