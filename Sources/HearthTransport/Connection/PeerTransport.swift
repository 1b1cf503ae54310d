#if canImport(Glibc)
import Glibc
#endif
import HearthCore
import HearthIdentity
import Logging
import NIOCore
import NIOPosix

/// Listens for and dials TLS connections between devices of one account, and hands the
/// sync engine authenticated frame streams.
///
/// ```swift
/// let transport = try PeerTransport(identity: identity)
/// let listener = try await transport.listen(host: "0.0.0.0", port: 0)
/// for await connection in listener.connections { … connection.peer.deviceID … }
///
/// let connection = try await transport.connect(host: "192.168.1.20", port: 7420)
/// try await connection.executeThenClose { inbound, outbound in … }
/// ```
package struct PeerTransport: Sendable {
    /// The cap on frames received (and sent).
    package let maximumFrameLength: Int
    package let group: any EventLoopGroup
    /// The TLS contexts, replaced as a pair when the device's certificate is renewed: each new
    /// connection takes the current one (OpenSSL contexts are not changed once in use).
    private let contexts: Locked<(server: SSLContext, client: SSLContext)>
    /// Failures caused by this machine (``LocalFailure``), logged once per cause and direction.
    package let localFailures = LocalFailureLog()
    /// Test hook: runs first in every new channel's initializer (accepted or dialled); a throw
    /// fails that connection's setup as a refused socket option would.
    var channelSetupHook: (@Sendable () throws -> Void)? = nil

    package init(configuration: TLSConfiguration, maximumFrameLength: Int = Frame.maximumLength,
                group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws {
        self.maximumFrameLength = maximumFrameLength
        self.group = group
        contexts = Locked((try SSLContext(configuration: configuration, role: .server),
                           try SSLContext(configuration: configuration, role: .client)))
    }

    /// The configuration of the current contexts; nil for a pairing transport
    /// (``init(pairing:maximumFrameLength:group:)``).
    package var configuration: TLSConfiguration? { contexts.withLock { $0.server.configuration } }
    var serverContext: SSLContext { contexts.withLock { $0.server } }
    var clientContext: SSLContext { contexts.withLock { $0.client } }

    /// Presents `identity` (the same key with a renewed certificate) on connections made from now
    /// on; connections already up keep theirs.
    package func replaceIdentity(_ identity: DeviceIdentity) throws {
        guard var configuration = self.configuration else {
            throw TLSError(code: .configuration, reason: "a pairing transport has no device identity to replace")
        }
        configuration.identity = identity
        let fresh = (try SSLContext(configuration: configuration, role: .server), try SSLContext(configuration: configuration, role: .client))
        contexts.withLock { $0 = fresh }
    }

    /// A transport for pairing connections (docs/protocol.md, "Pairing"): the same listener,
    /// dialler, frames and timeouts, with ``PairingTLSConfiguration``'s handshake. Its
    /// connections' ``TLSPeer`` is whoever proved the key of the certificate it presented.
    package init(pairing: PairingTLSConfiguration, maximumFrameLength: Int,
                group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws {
        self.maximumFrameLength = maximumFrameLength
        self.group = group
        contexts = Locked((try SSLContext(pairing: pairing, role: .server), try SSLContext(pairing: pairing, role: .client)))
    }

    package init(identity: DeviceIdentity, removals: DeviceRemovals? = nil, removalNotice: (@Sendable (DeviceID) -> [UInt8]?)? = nil,
                logger: Logger, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws {
        try self.init(configuration: TLSConfiguration(identity: identity, removals: removals, removalNotice: removalNotice, logger: logger),
                      group: group)
    }

    /// Starts listening. Each connection that completes the handshake with a device of the
    /// account appears in ``PeerListener/connections``; refused ones are logged and closed.
    /// TCP keepalive on every connection: a link idle for 45 s is probed by the kernel every
    /// 15 s, and dropped after 3 unanswered probes (90 s), even while the sync protocol's own
    /// heartbeat is sparse; no wake-up of this process is involved. And the user timeout: data
    /// left unacknowledged for 90 s drops the link too (without it, a busy link to a vanished
    /// machine would retransmit for about 15 minutes). So a link to a machine that vanished is
    /// closed by the kernel within 90 s, idle or busy, and the session ends at once.
    static let keepAlive = (idle: SocketOptionValue(45), interval: SocketOptionValue(15), count: SocketOptionValue(3))
    static let userTimeout = ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_USER_TIMEOUT))
    static let userTimeoutMilliseconds = SocketOptionValue(90_000)
    static let keepAliveIdle = ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_KEEPIDLE))
    static let keepAliveInterval = ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_KEEPINTVL))
    static let keepAliveCount = ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_KEEPCNT))

    package func listen(host: String, port: Int) async throws -> PeerListener {
        let (connections, continuation) = AsyncStream<PeerConnection>.makeStream()
        let contexts = contexts
        let maximumFrameLength = maximumFrameLength
        let logger = serverContext.logger
        let setupHook = channelSetupHook
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // Out of descriptors, accept fails at once on every wake-up: pause accepting a
            // moment instead of spinning (NIO's handler; the error still travels on).
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(AcceptBackoffHandler()) }
            }
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.socketOption(.so_keepalive), value: 1)
            .childChannelOption(Self.keepAliveIdle, value: Self.keepAlive.idle)
            .childChannelOption(Self.keepAliveInterval, value: Self.keepAlive.interval)
            .childChannelOption(Self.keepAliveCount, value: Self.keepAlive.count)
            .childChannelOption(Self.userTimeout, value: Self.userTimeoutMilliseconds)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try setupHook?()
                    let established = channel.eventLoop.makePromise(of: PeerConnection.self)
                    try Self.addHandlers(to: channel, context: contexts.withLock { $0.server }, expectedPeer: nil,
                                         maximumFrameLength: maximumFrameLength, logger: logger, established: established)
                    established.futureResult.whenSuccess { connection in
                        switch continuation.yield(connection) {
                        case .enqueued: break
                        case .dropped, .terminated: channel.close(promise: nil)  // nobody will use it
                        @unknown default: channel.close(promise: nil)
                        }
                    }
                }
            }
            .withBoundSocket(try Self.listeningSocket(SocketAddress.makeAddressResolvingHost(host, port: port)))
            .get()
        // Last in the pipeline, after NIO's accept handler: an accepted connection whose
        // options or initializer failed is reset by NIO and its error sent this way, and so is
        // an accept error; nothing else would ever say why the peer was cut off.
        do {
            try await channel.pipeline.addHandler(LocalFailureReporter(localFailures, logger: logger)).get()
        } catch {
            try? await channel.close()
            throw error
        }
        continuation.onTermination = { _ in channel.close(promise: nil) }
        return PeerListener(channel: channel, connections: connections, continuation: continuation)
    }

    /// A TCP socket bound to `address`, with SO_REUSEADDR, non-blocking and close-on-exec.
    ///
    /// NIO's own `bind` makes sockets without close-on-exec: every process the app spawns
    /// meanwhile (with posix_spawn or fork/exec, unless it closes what it inherits) would keep
    /// the listening socket open after the store stops syncing, holding the port (the next
    /// start cannot bind it) and accepting connections nobody answers.
    static func listeningSocket(_ address: SocketAddress) throws -> NIOBSDSocket.Handle {
        let fd = socket(address.protocol.rawValue, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw IOError(errnoCode: errno, reason: "socket") }
        var one: CInt = 1
        let bound = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<CInt>.size)) == 0
            && address.withSockAddr { bind(fd, $0, socklen_t($1)) } == 0
        guard bound else {
            let code = errno
            close(fd)
            throw IOError(errnoCode: code, reason: "bind(descriptor:ptr:bytes:)")
        }
        return fd
    }

    /// Dials a peer and completes the handshake.
    ///
    /// - Parameter expecting: the device ID to insist on (from discovery); nil accepts any
    ///   device of the account.
    /// - Note: in TLS 1.3 the client finishes its handshake before the server has checked
    ///   the client's certificate. If the server refuses this device, the refusal arrives
    ///   as an error on the inbound stream, before any frame.
    package func connect(host: String, port: Int, expecting: DeviceID? = nil) async throws -> PeerConnection {
        try await connect(host: host, port: port, expecting: expecting, socketHandlers: { [] })
    }

    /// `connect` with test hooks: handlers placed between the socket and TLS, and a raw
    /// mode that skips the frame codec (to send malformed frames).
    func connect(host: String, port: Int, expecting: DeviceID?, framing: Bool = true,
                 socketHandlers: @escaping @Sendable () -> [any ChannelHandler]) async throws -> PeerConnection {
        let clientContext = clientContext
        let maximumFrameLength = maximumFrameLength
        let logger = clientContext.logger
        let promiseBox = EstablishmentBox()
        let setupHook = channelSetupHook
        let dialling = ClientBootstrap(group: group)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelOption(Self.keepAliveIdle, value: Self.keepAlive.idle)
            .channelOption(Self.keepAliveInterval, value: Self.keepAlive.interval)
            .channelOption(Self.keepAliveCount, value: Self.keepAlive.count)
            .channelOption(Self.userTimeout, value: Self.userTimeoutMilliseconds)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try setupHook?()
                    let established = channel.eventLoop.makePromise(of: PeerConnection.self)
                    promiseBox.set(established.futureResult)
                    try channel.pipeline.syncOperations.addHandlers(socketHandlers())
                    try Self.addHandlers(to: channel, context: clientContext, expectedPeer: expecting,
                                         maximumFrameLength: framing ? maximumFrameLength : nil,
                                         logger: logger, established: established)
                }
            }
        let channel: any Channel
        do {
            channel = try await dialling.connect(host: host, port: port).get()
        } catch {
            // A local cause (a refused socket option, no descriptors) is logged here, once;
            // the caller's retry loop only sees a failed dial.
            localFailures.report(error, while: "dial", logger: logger)
            throw error
        }
        do {
            return try await promiseBox.get().get()
        } catch {
            try? await channel.close()
            throw error
        }
    }

    static func addHandlers(to channel: any Channel, context: SSLContext, expectedPeer: DeviceID?,
                            maximumFrameLength: Int?, logger: Logger,
                            established: EventLoopPromise<PeerConnection>) throws {
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(TLSHandler(context: context, expectedPeer: expectedPeer))
        if let maximumFrameLength {
            try pipeline.addHandler(ByteToMessageHandler(FrameDecoder(maximumLength: maximumFrameLength)))
            try pipeline.addHandler(FrameEncoder(maximumLength: maximumFrameLength))
        }
        try pipeline.addHandler(ConnectionGuard(established: established, logger: logger))
    }
}

/// Hands the establishment future from the channel initializer to `connect`.
private final class EstablishmentBox: Sendable {
    private let future = Locked<EventLoopFuture<PeerConnection>?>(nil)
    func set(_ value: EventLoopFuture<PeerConnection>) { future.withLock { $0 = value } }
    func get() -> EventLoopFuture<PeerConnection> { future.withLock { $0! } }
}

/// A listening socket and the stream of authenticated connections it accepts.
package final class PeerListener: Sendable {
    /// Connections that completed the handshake, in order. Each must be used (or closed)
    /// by the consumer.
    package let connections: AsyncStream<PeerConnection>
    private let channel: any Channel
    private let continuation: AsyncStream<PeerConnection>.Continuation

    init(channel: any Channel, connections: AsyncStream<PeerConnection>, continuation: AsyncStream<PeerConnection>.Continuation) {
        self.channel = channel
        self.connections = connections
        self.continuation = continuation
    }

    /// The address and port actually bound (port 0 picks a free one).
    package var localAddress: SocketAddress? { channel.localAddress }
    package var port: Int? { channel.localAddress?.port }

    /// Stops accepting. Connections already handed out stay open.
    package func close() async {
        try? await channel.close()
        continuation.finish()
    }
}
