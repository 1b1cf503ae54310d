import Foundation
import HearthCore
import HearthTransport
import Logging
import NIOCore

/// An attached process's side of its connection to the host, on the connection's event loop:
/// gathers the snapshot's parts and hands every message to the store. When the connection
/// ends, the store reattaches or takes over (``AttachedStore/hostConnectionLost(_:)``).
final class LocalClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private weak var attached: AttachedStore?
    /// Parts of a snapshot received so far.
    private var parts: [Entry] = []
    /// The store is gone and a last-resort close is scheduled (``storeGone(_:)``).
    private var closeScheduled = false

    init(attached: AttachedStore?) {
        self.attached = attached
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The store gone (or in its deinit): its attachment outlives it by a moment.
        guard let attached, attached.backend != nil else { return storeGone(context) }
        let decoded: LocalMessage.Decoded
        do {
            decoded = try LocalMessage.decode(unwrapInboundIn(data).readableData)
        } catch {
            attached.logger.error("the process hosting the store sent a malformed frame (\(error)); reconnecting",
                                 metadata: ["store": "\(attached.storeIdentifier)"])
            context.close(promise: nil)
            return
        }
        if !decoded.undecodable.isEmpty {
            attached.logger.warning("the process hosting the store sent \(decoded.undecodable.count) entries that do not read; ignored: \(decoded.undecodable.map(\.description).joined(separator: "; "))",
                                   metadata: ["store": "\(attached.storeIdentifier)"])
        }
        switch decoded.message {
        case .snapshot(let snapshot):
            parts += snapshot.entries
            guard !snapshot.more else { return }
            let entries = parts
            parts = []
            attached.installSnapshot(entries, account: snapshot.account, device: snapshot.device, reason: snapshot.reason,
                                    channel: context.channel)
        case .change(let reason, let entries):
            attached.applyHostChange(entries, reason: reason, channel: context.channel)
        case .acknowledged:
            break   // from a host of an earlier version: applied, not yet saved; nothing to do until it is durable
        case .durable(let vector):
            attached.hostDurable(vector)
        case .synchronized(let id, let saved):
            attached.hostSynchronized(id, saved: saved)
        case .refused(let refusal):
            attached.hostRefused(refusal, channel: context.channel)
        case .error(let reason):
            attached.logger.error("the process hosting the store closed the connection: \(reason)",
                                 metadata: ["store": "\(attached.storeIdentifier)"])
            context.close(promise: nil)
        case .hello, .write, .synchronize:
            attached.logger.error("the process hosting the store sent a message only clients send (\(decoded.message.typeName)); reconnecting",
                                 metadata: ["store": "\(attached.storeIdentifier)"])
            context.close(promise: nil)
        }
    }

    /// A frame arrived after the store was let go of: its deinit is putting the last writes out
    /// on this connection and closes it once they are written (``AttachedStore/detach(fromDeinitOf:)``).
    /// Closing here instead would drop them: the deinit's writes are a task queued behind this
    /// read. The frame is ignored; should no deinit close the connection, a close 5 s on does.
    private func storeGone(_ context: ChannelHandlerContext) {
        guard !closeScheduled else { return }
        closeScheduled = true
        let channel = context.channel
        context.eventLoop.scheduleTask(in: .seconds(5)) { channel.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        attached?.logger.error("the connection to the process hosting the store failed: \(error)",
                               metadata: ["store": "\(attached?.storeIdentifier ?? "?")"])
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        attached?.hostConnectionLost(context.channel)
        context.fireChannelInactive()
    }
}
