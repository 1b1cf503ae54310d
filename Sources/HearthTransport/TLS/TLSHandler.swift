import CHearthOpenSSL
import HearthIdentity
import Logging
import NIOCore

/// Drives an OpenSSL `SSL` over memory BIOs inside a NIO pipeline: ciphertext below,
/// plaintext above.
///
/// - The handshake starts when the channel becomes active (the client sends its hello) and
///   must finish within the configured timeout. Success fires
///   ``TLSEvent/handshakeCompleted(_:)`` with the peer's device ID before any application
///   data is passed up, and completes ``handshakeFuture``.
/// - Failure is logged with OpenSSL's reason, surfaces as a ``TLSError`` through
///   `errorCaught` and ``handshakeFuture``, and closes the connection after sending
///   OpenSSL's alert. Nothing written above this handler before the handshake completes
///   ever reaches the network, so a refused peer receives no application data.
/// - Writes are buffered until flush, then encrypted and written in one go; backpressure is
///   the channel's own writability, since ciphertext goes to the socket right away.
/// - Closing sends close_notify; a connection that ends without the peer's close_notify is
///   reported as ``TLSError/Code/uncleanShutdown``.
package final class TLSHandler: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer
    package typealias OutboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    private enum State {
        case idle, handshaking, active
        /// Closed, cleanly or not; nothing more is read or written.
        case closed
    }

    private let connection: SSLConnection
    private let handshakeTimeoutAmount: TimeAmount
    private let alpnProtocol: String
    private let isPairing: Bool
    private let role: SSLContext.Role
    private let expectedPeer: DeviceID?
    /// A server's notice to removed devices (``TLSConfiguration/removalNotice``).
    private let removalNotice: (@Sendable (DeviceID) -> [UInt8]?)?
    private var logger: Logger
    private var state = State.idle
    private var pendingWrites: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var flushPending = false
    private var handshakePromise: EventLoopPromise<TLSPeer>?
    private var handshakeTimeout: Scheduled<Void>?
    /// Read chunk for decrypted data: one TLS record's worth.
    private static let readChunk = 16 * 1024

    /// - Parameters:
    ///   - context: the server or client context, shared by all connections of a listener.
    ///   - expectedPeer: for a client dialling a known device: refuse any other device of
    ///     the account.
    package init(context: SSLContext, expectedPeer: DeviceID? = nil) throws {
        connection = try SSLConnection(context: context)
        handshakeTimeoutAmount = context.handshakeTimeout
        alpnProtocol = context.alpnProtocol
        isPairing = context.isPairing
        role = context.role
        self.expectedPeer = expectedPeer
        removalNotice = context.role == .server ? context.configuration?.removalNotice : nil
        logger = context.logger
    }

    /// Succeeds with the authenticated peer once the handshake completes, fails with the
    /// ``TLSError`` that ended it. Available once the handler is in a pipeline.
    package var handshakeFuture: EventLoopFuture<TLSPeer>? { handshakePromise?.futureResult }

    // MARK: Lifecycle

    package func handlerAdded(context: ChannelHandlerContext) {
        handshakePromise = context.eventLoop.makePromise(of: TLSPeer.self)
        logger[metadataKey: "peer"] = "\(context.channel.remoteAddress.map { "\($0)" } ?? "?")"
        logger[metadataKey: "role"] = "\(role)"
        if context.channel.isActive { start(context: context) }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        handshakeTimeout?.cancel()
        handshakePromise?.fail(TLSError.closed())  // no-op once completed
        failPendingWrites(TLSError.closed())
    }

    package func channelActive(context: ChannelHandlerContext) {
        if logger[metadataKey: "peer"] == "?" {
            logger[metadataKey: "peer"] = "\(context.channel.remoteAddress.map { "\($0)" } ?? "?")"
        }
        start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard case .idle = state else { return }
        state = .handshaking
        let timeout = handshakeTimeoutAmount
        handshakeTimeout = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
            guard case .handshaking = state else { return }
            fail(TLSError(code: .handshakeTimeout, reason: "no handshake within \(timeout)"), context: context)
        }
        if role == .client { handshake(context: context) }
    }

    package func channelInactive(context: ChannelHandlerContext) {
        switch state {
        case .idle, .handshaking:
            let error = TLSError.handshakeFailed("the connection closed during the handshake")
            logger.warning("TLS connection refused", metadata: ["reason": "\(error.reason)"])
            state = .closed
            handshakeTimeout?.cancel()
            handshakePromise?.fail(error)
            context.fireErrorCaught(error)
        case .active:
            // The transport ended without the peer's close_notify: it crashed, the network
            // broke, or someone truncated the stream. Report it, never treat it as a clean end.
            state = .closed
            logger.info("TLS connection ended without close_notify")
            context.fireErrorCaught(TLSError.uncleanShutdown())
        case .closed:
            break
        }
        failPendingWrites(TLSError.closed())
        context.fireChannelInactive()
    }

    // MARK: Inbound

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        switch state {
        case .closed, .idle:
            return  // after close (or before start, which NIO never does): drop
        case .handshaking, .active:
            break
        }
        let written = buffer.withUnsafeReadableBytes { raw -> Int32 in
            guard raw.count > 0 else { return 0 }
            return BIO_write(connection.networkInput, raw.baseAddress, Int32(raw.count))
        }
        guard written == Int32(buffer.readableBytes) else {
            fail(TLSError(code: .protocolError, reason: SSLContext.reasons("BIO_write")), context: context)
            return
        }
        switch state {
        case .handshaking: handshake(context: context)
        case .active: readApplicationData(context: context)
        case .idle, .closed: break
        }
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        writeNetworkOutput(context: context, flush: true)
        context.fireChannelReadComplete()
    }

    private func handshake(context: ChannelHandlerContext) {
        OpenSSLErrorQueue.clear()
        let rc = SSL_do_handshake(connection.ssl)
        if rc == 1 {
            handshakeCompleted(context: context)
            return
        }
        let error = SSL_get_error(connection.ssl, rc)
        switch error {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            writeNetworkOutput(context: context, flush: true)
        default:
            fail(handshakeError(sslError: error), context: context)
        }
    }

    /// The most precise reason OpenSSL can give for a failed handshake.
    private func handshakeError(sslError: Int32) -> TLSError {
        let verify = SSL_get_verify_result(connection.ssl)
        if verify == X509_V_ERR_CERT_REVOKED {
            OpenSSLErrorQueue.clear()
            return TLSError(code: .peerRemoved, reason: "the peer's device was removed from the account")
        }
        if verify != X509_V_OK {
            OpenSSLErrorQueue.clear()
            let text = X509_verify_cert_error_string(verify).map { String(cString: $0) } ?? "verify error \(verify)"
            return .certificateRejected(text)
        }
        let reasons = OpenSSLErrorQueue.drain()
        if reasons.isEmpty {
            return .handshakeFailed(sslError == SSL_ERROR_SYSCALL ? "unexpected end of stream" : "SSL error \(sslError)")
        }
        if let removed = Self.removedByPeer(reasons) { return removed }
        if reasons.contains(where: { $0.contains("no application protocol") }) {
            return TLSError(code: .alpnMismatch, reason: reasons.joined(separator: "; "))
        }
        return .handshakeFailed(reasons.joined(separator: "; "))
    }

    /// The error for a `certificate_revoked` alert from the peer, if that is what `reasons` say.
    static func removedByPeer(_ reasons: [String]) -> TLSError? {
        guard reasons.contains(where: { $0.contains("certificate revoked") }) else { return nil }
        return TLSError(code: .removedByPeer, reason: "the peer refused this device's certificate as revoked: " + reasons.joined(separator: "; "))
    }

    private func handshakeCompleted(context: ChannelHandlerContext) {
        // Send what OpenSSL produced (the client's Finished) before any checks can close.
        writeNetworkOutput(context: context, flush: true)
        var alpn: UnsafePointer<UInt8>?
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(connection.ssl, &alpn, &alpnLength)
        let selected = alpn.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(alpnLength)), as: UTF8.self) }
        guard selected == alpnProtocol else {
            fail(TLSError(code: .alpnMismatch, reason: "the peer did not agree on ALPN \(alpnProtocol)"), context: context)
            return
        }
        // OpenSSL has verified the chain against the account CA (for pairing: the leaf alone);
        // what is left is to name the peer. A CA certificate as leaf was already refused by the
        // purpose check.
        guard let x509 = SSL_get0_peer_certificate(connection.ssl) else {
            fail(.certificateRejected("the peer presented no certificate"), context: context)
            return
        }
        let certificate = Certificate(retaining: x509)
        guard !certificate.isCertificateAuthority, let key = certificate.publicKey else {
            fail(.certificateRejected("the peer certificate is not an Ed25519 device certificate"), context: context)
            return
        }
        let peer = TLSPeer(deviceID: DeviceID(publicKey: key), certificate: certificate)
        if let expectedPeer, expectedPeer != peer.deviceID {
            fail(TLSError(code: .unexpectedPeer, reason: "dialled \(expectedPeer.short), reached \(peer.deviceID.short)"), context: context)
            return
        }
        if let removalNotice, let notice = removalNotice(peer.deviceID) {
            tellRemoved(peer, notice, context: context)
            return
        }
        state = .active
        handshakeTimeout?.cancel()
        handshakeTimeout = nil
        logger[metadataKey: "device"] = "\(peer.deviceID.short)"
        logger.debug(isPairing ? "TLS pairing handshake completed" : "TLS handshake completed",
                     metadata: ["name": "\(certificate.commonName ?? "?")"])
        handshakePromise?.succeed(peer)
        context.fireUserInboundEventTriggered(TLSEvent.handshakeCompleted(peer))
        guard case .active = state else { return }  // the event's receivers may have closed
        if flushPending { flushPendingWrites(context: context) }
        // Application data may have arrived in the same read as the peer's Finished.
        readApplicationData(context: context)
    }

    /// A removed device dialled us: it gets `notice` (its signed removal record) and
    /// close_notify; the application never sees the connection (the handshake fails for it).
    private func tellRemoved(_ peer: TLSPeer, _ notice: [UInt8], context: ChannelHandlerContext) {
        handshakeTimeout?.cancel()
        handshakeTimeout = nil
        state = .closed
        let written = notice.withUnsafeBytes { SSL_write(connection.ssl, $0.baseAddress, Int32($0.count)) }
        OpenSSLErrorQueue.clear()
        _ = SSL_shutdown(connection.ssl)
        OpenSSLErrorQueue.clear()
        writeNetworkOutput(context: context, flush: true)
        let error = TLSError(code: .peerRemoved, reason: "the peer's device was removed from the account; "
                             + (written > 0 ? "sent it the signed removal record" : "could not send it the removal record"))
        logger.notice("TLS connection refused", metadata: ["code": "\(error.code)", "reason": "\(error.reason)", "device": "\(peer.deviceID.short)"])
        handshakePromise?.fail(error)
        failPendingWrites(error)
        context.fireErrorCaught(error)
        context.close(mode: .all, promise: nil)
    }

    private func readApplicationData(context: ChannelHandlerContext) {
        while case .active = state {
            var rc: Int32 = 0
            var buffer = context.channel.allocator.buffer(capacity: Self.readChunk)
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: Self.readChunk) { raw in
                rc = SSL_read(connection.ssl, raw.baseAddress, Int32(min(raw.count, Int(Int32.max))))
                return rc > 0 ? Int(rc) : 0
            }
            if rc > 0 {
                context.fireChannelRead(wrapInboundOut(buffer))
                continue
            }
            let error = SSL_get_error(connection.ssl, rc)
            switch error {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                writeNetworkOutput(context: context, flush: true)
                return
            case SSL_ERROR_ZERO_RETURN:
                // The peer sent close_notify: a clean end. Answer with ours and close.
                logger.debug("TLS close_notify received")
                closeCleanly(context: context, promise: nil)
                return
            default:
                let reasons = OpenSSLErrorQueue.drain()
                let reason = reasons.isEmpty ? "SSL_read error \(error)" : reasons.joined(separator: "; ")
                // In TLS 1.3 a client's handshake is done once it sent its Finished: the
                // server's verdict on its certificate arrives as the first read.
                fail(Self.removedByPeer(reasons) ?? TLSError(code: .protocolError, reason: reason), context: context)
                return
            }
        }
    }

    // MARK: Outbound

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard state != .closed else {
            promise?.fail(TLSError.closed())
            return
        }
        pendingWrites.append((unwrapOutboundIn(data), promise))
    }

    package func flush(context: ChannelHandlerContext) {
        switch state {
        case .active:
            flushPendingWrites(context: context)
        case .idle, .handshaking:
            flushPending = true  // after the handshake
        case .closed:
            break
        }
    }

    /// The most plaintext one TLS record carries (RFC 8446, 5.1).
    static let recordPayload = 16_384

    private func flushPendingWrites(context: ChannelHandlerContext) {
        flushPending = false
        guard !pendingWrites.isEmpty else { return }
        let writes = pendingWrites
        pendingWrites = []
        let promises = writes.compactMap { $0.1 }
        // What is flushed together goes out as few TLS records as it fits in: each SSL_write is
        // at least one record (22 bytes of header and tag in TLS 1.3, and an AEAD pass), and a
        // frame comes as two writes (its length, then its payload). Small writes are gathered
        // into one buffer of at most a record's payload; a bigger one is written as it is.
        var gathered: ByteBuffer?
        func write(_ buffer: ByteBuffer) -> Bool {
            OpenSSLErrorQueue.clear()
            // A memory BIO never blocks, so SSL_write takes everything in one call.
            let rc = buffer.withUnsafeReadableBytes { raw in
                SSL_write(connection.ssl, raw.baseAddress, Int32(raw.count))
            }
            return rc > 0
        }
        let capacity = min(Self.recordPayload, writes.reduce(0) { $0 + $1.0.readableBytes })
        var written = true
        for (buffer, _) in writes {
            guard buffer.readableBytes > 0 else { continue }
            if writes.count == 1 {
                written = write(buffer)
                break
            }
            if (gathered?.readableBytes ?? 0) + buffer.readableBytes <= Self.recordPayload {
                if gathered == nil { gathered = context.channel.allocator.buffer(capacity: capacity) }
                gathered!.writeImmutableBuffer(buffer)
                continue
            }
            if let full = gathered {
                gathered = nil
                guard write(full) else { written = false; break }
            }
            if buffer.readableBytes < Self.recordPayload {
                gathered = context.channel.allocator.buffer(capacity: Self.recordPayload)
                gathered!.writeImmutableBuffer(buffer)
            } else {
                written = write(buffer)
                if !written { break }
            }
        }
        if written, let rest = gathered { written = write(rest) }
        if !written {
            let error = TLSError(code: .protocolError, reason: SSLContext.reasons("SSL_write"))
            for promise in promises { promise.fail(error) }
            fail(error, context: context)
            return
        }
        let aggregate: EventLoopPromise<Void>?
        if promises.isEmpty {
            aggregate = nil
        } else {
            let promise = context.eventLoop.makePromise(of: Void.self)
            let collected = promises
            promise.futureResult.whenComplete { result in
                for p in collected { p.completeWith(result) }
            }
            aggregate = promise
        }
        writeNetworkOutput(context: context, flush: true, promise: aggregate)
    }

    /// Moves everything OpenSSL produced to the socket.
    private func writeNetworkOutput(context: ChannelHandlerContext, flush: Bool, promise: EventLoopPromise<Void>? = nil) {
        let pending = connection.pendingOutput
        guard pending > 0 else {
            promise?.succeed()
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: pending)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { raw in
            Int(max(0, BIO_read(connection.networkOutput, raw.baseAddress, Int32(pending))))
        }
        context.write(wrapOutboundOut(buffer), promise: promise)
        if flush { context.flush() }
    }

    package func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        switch (state, mode) {
        case (_, .input):
            context.close(mode: mode, promise: promise)
        case (.active, _):
            closeCleanly(context: context, promise: promise)
        case (.idle, _), (.handshaking, _):
            state = .closed
            handshakeTimeout?.cancel()
            handshakePromise?.fail(TLSError(code: .closed, reason: "closed before the handshake completed"))
            failPendingWrites(TLSError.closed())
            context.close(mode: .all, promise: promise)
        case (.closed, _):
            context.close(mode: .all, promise: promise)
        }
    }

    /// Sends close_notify and closes. Whatever the peer still sends is not waited for:
    /// TLS 1.3 lets either side close its half without waiting.
    private func closeCleanly(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        // What the application wrote before closing goes out first (a pairing refusal written
        // just before the close was lost when these were dropped), then close_notify.
        if !pendingWrites.isEmpty {
            flushPendingWrites(context: context)
            guard case .active = state else {
                // The write failed and fail() closed the connection.
                context.close(mode: .all, promise: promise)
                return
            }
        }
        state = .closed
        failPendingWrites(TLSError.closed())
        OpenSSLErrorQueue.clear()
        _ = SSL_shutdown(connection.ssl)
        OpenSSLErrorQueue.clear()
        writeNetworkOutput(context: context, flush: true)
        context.close(mode: .all, promise: promise)
    }

    // MARK: Failure

    /// Ends the connection for `error`: log, send OpenSSL's alert if it made one, tell
    /// the pipeline, close.
    private func fail(_ error: TLSError, context: ChannelHandlerContext) {
        guard state != .closed else { return }
        let duringHandshake: Bool
        if case .active = state { duringHandshake = false } else { duringHandshake = true }
        state = .closed
        handshakeTimeout?.cancel()
        handshakeTimeout = nil
        OpenSSLErrorQueue.clear()
        writeNetworkOutput(context: context, flush: true)
        if duringHandshake {
            if error.code == .peerRemoved || error.code == .removedByPeer {
                // Expected after a removal (each side tries a few times): not a warning.
                logger.notice("TLS connection refused", metadata: ["code": "\(error.code)", "reason": "\(error.reason)"])
            } else {
                logger.warning("TLS connection refused", metadata: ["code": "\(error.code)", "reason": "\(error.reason)"])
            }
        } else {
            if error.code == .removedByPeer {
                logger.notice("TLS connection failed", metadata: ["code": "\(error.code)", "reason": "\(error.reason)"])
            } else {
                logger.warning("TLS connection failed", metadata: ["code": "\(error.code)", "reason": "\(error.reason)"])
            }
        }
        handshakePromise?.fail(error)
        failPendingWrites(error)
        context.fireErrorCaught(error)
        context.close(mode: .all, promise: nil)
    }

    private func failPendingWrites(_ error: any Error) {
        let writes = pendingWrites
        pendingWrites = []
        for (_, promise) in writes { promise?.fail(error) }
    }
}

@available(*, unavailable)
extension TLSHandler: Sendable {}
