import Foundation
import HearthCore
import HearthTransport
import Logging
import NIOCore

/// The host's side of one attached client, on the connection's event loop: checks the peer's
/// uid, answers the hello with a snapshot, applies the client's writes, answers synchronize
/// requests. A bad frame is logged and closes this connection only; no data is lost (the
/// client, if it is one, reattaches and sends again what was not durable).
final class LocalHostHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// `struct ucred` of `<sys/socket.h>` (which Swift's Glibc does not import: it sits behind
    /// _GNU_SOURCE), read with `SO_PEERCRED`.
    struct PeerCredentials: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    private let host: StoreHost
    private weak var backend: StoreBackend?
    private var peer: PeerCredentials?
    /// Frames that arrived before the credentials were read.
    private var early: [ByteBuffer] = []
    private var attached = false
    private var closing = false

    init(host: StoreHost, backend: StoreBackend) {
        self.host = host
        self.backend = backend
    }

    private var logger: Logger { host.logger }

    private func who(_ context: ChannelHandlerContext) -> String {
        peer.map { "process \($0.pid) (uid \($0.uid))" } ?? "a local process"
    }

    func channelActive(context: ChannelHandlerContext) {
        guard let provider = context.channel as? any SocketOptionProvider else {
            refuse(context, "cannot read the peer's credentials on this channel")
            return
        }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
            .whenComplete { (result: Result<PeerCredentials, any Error>) in
                let (handler, context) = loopBound.value
                handler.credentialsRead(result, context: context)
            }
        context.fireChannelActive()
    }

    private func credentialsRead(_ result: Result<PeerCredentials, any Error>, context: ChannelHandlerContext) {
        switch result {
        case .failure(let error):
            refuse(context, "cannot read the peer's credentials: \(error)")
        case .success(let credentials):
            peer = credentials
            guard credentials.uid == geteuid() else {
                logger.warning("refused a local connection to the store from process \(credentials.pid) of uid \(credentials.uid): only this user's (uid \(geteuid())) processes may attach",
                               metadata: ["store": "\(backend?.storeIdentifier ?? "?")"])
                reply(.error("refused: uid \(credentials.uid) is not the store owner's"), context: context)
                close(context)
                return
            }
            let frames = early
            early = []
            for frame in frames where !closing { handle(frame, context: context) }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard !closing else { return }
        guard peer != nil else {
            early.append(frame)
            return
        }
        handle(frame, context: context)
    }

    private func handle(_ frame: ByteBuffer, context: ChannelHandlerContext) {
        guard let backend else { return close(context) }
        let decoded: LocalMessage.Decoded
        do {
            decoded = try LocalMessage.decode(frame.readableData)
        } catch {
            refuse(context, "\(error)")
            return
        }
        switch decoded.message {
        case .hello(let hello):
            guard !attached else { return refuse(context, "a second hello") }
            guard hello.version == LocalMessage.protocolVersion else {
                return refuse(context, "protocol version \(hello.version); this host speaks \(LocalMessage.protocolVersion)")
            }
            guard LocalSocketDirectory.normalized(hello.dataDirectory) == LocalSocketDirectory.normalized(backend.dataDirectory),
                  hello.store == backend.storeIdentifier else {
                return refuse(context, "asks for store \(String(reflecting: hello.store)) in \(hello.dataDirectory); this socket serves \(String(reflecting: backend.storeIdentifier)) in \(backend.dataDirectory)")
            }
            // Registered before the snapshot is read: a change made in between is sent after it
            // (this event loop writes the snapshot first), at worst twice, which merging ignores.
            guard host.register(context.channel, pid: hello.pid) else { return close(context) }
            attached = true
            for part in StoreHost.snapshot(of: backend, reason: nil) {
                reply(part, context: context)
            }
            logger.debug("process \(hello.pid) attached", metadata: ["store": "\(backend.storeIdentifier)"])
        case .write(let entries):
            guard attached else { return refuse(context, "a write before the hello") }
            for refusal in host.receive(entries, undecodable: decoded.undecodable, from: context.channel) {
                reply(.refused(refusal), context: context)
            }
        case .synchronize(let id):
            guard attached else { return refuse(context, "a synchronize before the hello") }
            let channel = context.channel
            let logger = self.logger
            // The save blocks (fsync): on the store's I/O queue, never on this event loop.
            logger.debug("\(who(context)) asks for a save (request \(id))", metadata: ["store": "\(backend.storeIdentifier)"])
            let host = self.host
            backend.saves.ioQueue.async { [weak backend] in
                guard let backend else { return }
                let applied = host.applied
                let saved = backend.flush()
                logger.debug("answering save request \(id): saved \(saved)", metadata: ["store": "\(backend.storeIdentifier)"])
                // Unless the save itself just told it (StoreHost.saved(_:)), or an earlier one did.
                if saved, !applied.isEmpty { host.reportDurable(applied, to: channel) }
                StoreHost.send(.synchronized(id, saved: saved), on: channel, logger: logger)
                backend.syncEngine?.pushNow()
            }
        case .error(let reason):
            logger.warning("\(who(context)) reports an error and closes: \(reason)", metadata: ["store": "\(backend.storeIdentifier)"])
            close(context)
        case .snapshot, .acknowledged, .durable, .change, .synchronized, .refused:
            refuse(context, "a message only a host sends (\(decoded.message.typeName))")
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A process that exits with answers still unread resets its connection: it went away,
        // nothing is wrong (its writes are kept or were never confirmed to it).
        if let error = error as? IOError, error.errnoCode == ECONNRESET || error.errnoCode == EPIPE {
            logger.debug("\(who(context)) went away: \(error)", metadata: ["store": "\(backend?.storeIdentifier ?? "?")"])
            return close(context)
        }
        refuse(context, "\(error)")
    }

    func channelInactive(context: ChannelHandlerContext) {
        host.unregister(context.channel)
        context.fireChannelInactive()
    }

    /// Logs why this connection ends, tells the other side, and closes it.
    private func refuse(_ context: ChannelHandlerContext, _ reason: String) {
        guard !closing else { return }
        logger.warning("closing the local connection of \(who(context)): \(reason)",
                       metadata: ["store": "\(backend?.storeIdentifier ?? "?")"])
        reply(.error(reason), context: context)
        close(context)
    }

    private func close(_ context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        host.unregister(context.channel)
        context.close(promise: nil)
    }

    private func reply(_ message: LocalMessage, context: ChannelHandlerContext) {
        do {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: try message.encoded())), promise: nil)
        } catch {
            logger.error("cannot encode a reply to an attached process: \(error)")
        }
    }
}

extension LocalMessage {
    /// The `type` field, for log lines.
    var typeName: String { propertyList.dictionaryValue?["type"]?.stringValue ?? "?" }
}
