import Foundation
import HearthCore
import Logging
import NIOCore

/// An attached process's side of its connection to the host, on the connection's event loop:
/// gathers the snapshot's parts and hands every message to the store. When the connection
/// ends, the store reattaches or takes over (``StoreBackend/hostConnectionLost(_:)``).
final class LocalClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private weak var backend: StoreBackend?
    /// Parts of a snapshot received so far.
    private var parts: [Entry] = []
    /// The store is gone and a last-resort close is scheduled (``storeGone(_:)``).
    private var closeScheduled = false

    init(backend: StoreBackend?) {
        self.backend = backend
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let backend else { return storeGone(context) }
        let decoded: LocalMessage.Decoded
        do {
            decoded = try LocalMessage.decode(Data(unwrapInboundIn(data).readableBytesView))
        } catch {
            backend.logger.error("the process hosting the store sent a malformed frame (\(error)); reconnecting",
                                 metadata: ["store": "\(backend.storeIdentifier)"])
            context.close(promise: nil)
            return
        }
        if !decoded.undecodable.isEmpty {
            backend.logger.warning("the process hosting the store sent \(decoded.undecodable.count) entries that do not read; ignored: \(decoded.undecodable.map(\.description).joined(separator: "; "))",
                                   metadata: ["store": "\(backend.storeIdentifier)"])
        }
        switch decoded.message {
        case .snapshot(let snapshot):
            parts += snapshot.entries
            guard !snapshot.more else { return }
            let entries = parts
            parts = []
            backend.installSnapshot(entries, account: snapshot.account, device: snapshot.device, reason: snapshot.reason,
                                    channel: context.channel)
        case .change(let reason, let entries):
            backend.applyHostChange(entries, reason: reason, channel: context.channel)
        case .acknowledged:
            break   // applied by the host, not yet saved: nothing to do until it is durable
        case .durable(let vector):
            backend.hostDurable(vector)
        case .synchronized(let id, let saved):
            backend.hostSynchronized(id, saved: saved)
        case .refused(let refusal):
            backend.hostRefused(refusal, channel: context.channel)
        case .error(let reason):
            backend.logger.error("the process hosting the store closed the connection: \(reason)",
                                 metadata: ["store": "\(backend.storeIdentifier)"])
            context.close(promise: nil)
        case .hello, .write, .synchronize:
            backend.logger.error("the process hosting the store sent a message only clients send (\(decoded.message.typeName)); reconnecting",
                                 metadata: ["store": "\(backend.storeIdentifier)"])
            context.close(promise: nil)
        }
    }

    /// A frame arrived after the store was let go of: its deinit is putting the last writes out
    /// on this connection and closes it once they are written (``StoreBackend/detachFromDeinit()``).
    /// Closing here instead would drop them: the deinit's writes are a task queued behind this
    /// read. The frame is ignored; should no deinit close the connection, a close 5 s on does.
    private func storeGone(_ context: ChannelHandlerContext) {
        guard !closeScheduled else { return }
        closeScheduled = true
        let channel = context.channel
        context.eventLoop.scheduleTask(in: .seconds(5)) { channel.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        backend?.logger.error("the connection to the process hosting the store failed: \(error)",
                              metadata: ["store": "\(backend?.storeIdentifier ?? "?")"])
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        backend?.hostConnectionLost(context.channel)
        context.fireChannelInactive()
    }
}
