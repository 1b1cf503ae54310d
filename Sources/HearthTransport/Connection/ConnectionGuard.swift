import HearthIdentity
import Logging
import NIOCore

/// Sits above the TLS handler and the frame codec: turns the handshake into a
/// ``PeerConnection``, and closes the connection, with a logged reason, on any error.
///
/// Before the handshake completes, errors fail the establishment promise; after it, they
/// are passed on to the connection's inbound stream (which then throws) and the channel
/// is closed, so a bad frame can never be followed by "the next" frame.
final class ConnectionGuard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let established: EventLoopPromise<PeerConnection>
    private let logger: Logger
    private var isEstablished = false

    init(established: EventLoopPromise<PeerConnection>, logger: Logger) {
        self.established = established
        self.logger = logger
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let peer) = event as? TLSEvent, !isEstablished {
            isEstablished = true
            do {
                // Wrapped here, synchronously on the event loop, before the TLS handler
                // passes on any application data, so no frame can be missed.
                let channel = try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: context.channel)
                established.succeed(PeerConnection(peer: peer, remoteAddress: context.channel.remoteAddress, channel: channel))
            } catch {
                established.fail(error)
                context.close(promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !isEstablished {
            established.fail(error)  // the TLS handler has logged it already
        } else if let error = error as? FrameError {
            logger.warning("closing connection: bad frame", metadata: [
                "peer": "\(context.channel.remoteAddress.map { "\($0)" } ?? "?")",
                "code": "\(error.code)", "reason": "\(error.reason)",
            ])
        } else if !(error is TLSError) {
            logger.info("closing connection", metadata: ["reason": "\(error)"])
        }
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !isEstablished {
            established.fail(TLSError.handshakeFailed("the connection closed during the handshake"))
        }
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if !isEstablished { established.fail(TLSError.closed()) }
    }
}

@available(*, unavailable)
extension ConnectionGuard: Sendable {}
