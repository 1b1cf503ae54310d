import Foundation
import HearthCore
import HearthTransport
import Logging
import NIOCore
import NIOPosix

/// The Unix socket on which the process that owns a store's file serves it to the other
/// processes of this user that open the same store (docs/local-attach.md).
///
/// Each accepted connection gets a ``LocalHostHandler`` (on its NIO event loop): peer
/// credentials checked, then the hello, a snapshot, and the client's writes. Changes of the
/// store reach every attached client through ``broadcast(_:)``, from whatever thread made
/// them: a NIO channel write only queues, it never blocks.
final class LocalHost: Sendable {
    /// One attached client (after its hello).
    struct Client: Sendable {
        let channel: any Channel
        let pid: Int32
        /// The origins it has written under: its durable acknowledgements name these.
        var origins: Set<ReplicaID> = []
    }

    let path: String
    private let server: any Channel
    private let clients = Locked<[ObjectIdentifier: Client]>([:])
    private let stopped = Locked(false)
    let logger: Logger

    private init(path: String, server: any Channel, logger: Logger) {
        self.path = path
        self.server = server
        self.logger = logger
    }

    /// Listens on the store's socket for `backend`, replacing a socket file left by an earlier
    /// host (this process holds the store's lock now, so that one is gone). Blocks for the bind
    /// only (microseconds). Throws why it cannot.
    static func start(for backend: StoreBackend, dataDirectory: String) throws -> LocalHost {
        let path = LocalSocketDirectory.socketPath(dataDirectory: dataDirectory, storeIdentifier: backend.storeIdentifier)
        try LocalSocketDirectory.prepare((path as NSString).deletingLastPathComponent)
        // Bound under a name of its own, and renamed into place once it listens: a process
        // waiting for the socket to appear (``HolderWatch``) connects after the rename, never
        // between the bind and the listen, where the connect would be refused.
        let bound = String(path.dropLast(5)) + ".next"   // as long as ".sock": fits where it does
        let fd = try listeningSocket(bound)
        let logger = backend.logger
        let hostBox = Locked<LocalHost?>(nil)
        let server: any Channel
        do {
            server = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 64)
                .childChannelInitializer { [weak backend] channel in
                    channel.eventLoop.makeCompletedFuture {
                        guard let backend, let host = hostBox.withLock({ $0 }) else {
                            channel.close(promise: nil)
                            return
                        }
                        let pipeline = channel.pipeline.syncOperations
                        try pipeline.addHandler(ByteToMessageHandler(FrameDecoder(maximumLength: Frame.maximumLength)))
                        try pipeline.addHandler(FrameEncoder(maximumLength: Frame.maximumLength))
                        try pipeline.addHandler(LocalHostHandler(host: host, backend: backend))
                    }
                }
                .withBoundSocket(fd)
                .wait()
        } catch {
            unlink(bound)
            throw LocalAttachError("cannot listen on \(path): \(error)")
        }
        // Replaces a socket left by a host that died, in one step.
        guard rename(bound, path) == 0 else {
            let code = errno
            unlink(bound)
            server.close(promise: nil)
            throw LocalAttachError("cannot listen on \(path): rename: \(String(cString: strerror(code)))")
        }
        let host = LocalHost(path: path, server: server, logger: logger)
        hostBox.withLock { $0 = host }
        logger.debug("hosting the store for other processes", metadata: ["store": "\(backend.storeIdentifier)", "socket": "\(path)"])
        return host
    }

    /// A listening Unix socket at `path`, close-on-exec (NIO's own bind is not: a child the app
    /// spawns would keep it, and a client would connect to a socket nobody answers).
    private static func listeningSocket(_ path: String) throws -> NIOBSDSocket.Handle {
        guard var address = LocalSocketDirectory.address(path) else { throw LocalAttachError("socket path too long: \(path)") }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw LocalAttachError("socket: \(String(cString: strerror(errno)))") }
        unlink(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw LocalAttachError("bind \(path): \(String(cString: strerror(code)))")
        }
        // Owner only, whatever the umask: the folder already keeps others out; this says it twice.
        // Not by setting the umask around bind: it is the process's, and a folder another thread
        // made meanwhile came out 0600 (found under ThreadSanitizer).
        guard chmod(path, 0o600) == 0 else {
            let code = errno
            close(fd)
            throw LocalAttachError("chmod \(path): \(String(cString: strerror(code)))")
        }
        return fd
    }

    // MARK: Clients

    /// Records an attached client; returns false once stopped (the handler then closes it).
    func register(_ channel: any Channel, pid: Int32) -> Bool {
        guard !stopped.withLock({ $0 }) else { return false }
        clients.withLock { $0[ObjectIdentifier(channel)] = Client(channel: channel, pid: pid) }
        return true
    }

    func unregister(_ channel: any Channel) {
        clients.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    func noteOrigins(_ origins: some Sequence<ReplicaID>, of channel: any Channel) {
        clients.withLock { $0[ObjectIdentifier(channel)]?.origins.formUnion(origins) }
    }

    var clientCount: Int { clients.withLock { $0.count } }

    /// Sends `message` to every attached client.
    func broadcast(_ message: LocalMessage) {
        let targets = clients.withLock { $0.values.map(\.channel) }
        guard !targets.isEmpty else { return }
        do {
            let payload = try message.encoded()
            for channel in targets { channel.writeAndFlush(ByteBuffer(bytes: payload), promise: nil) }
        } catch {
            logger.error("cannot encode a message for the attached processes: \(error)")
        }
    }

    /// Tells each client how far its writes are on disk: `applied` is what the host had applied
    /// when the save that just succeeded took its snapshot.
    func saved(_ applied: [ReplicaID: UInt64]) {
        let targets = clients.withLock { $0.values.filter { !$0.origins.isEmpty } }
        for client in targets {
            let durable = VersionVector(applied.filter { client.origins.contains($0.key) })
            guard !durable.counters.isEmpty else { continue }
            Self.send(.durable(durable), on: client.channel, logger: logger)
        }
    }

    static func send(_ message: LocalMessage, on channel: any Channel, logger: Logger) {
        do {
            channel.writeAndFlush(ByteBuffer(bytes: try message.encoded()), promise: nil)
        } catch {
            logger.error("cannot encode a message for an attached process: \(error)")
            channel.close(promise: nil)
        }
    }

    /// Closes every client's connection; they reattach (and get a fresh snapshot).
    func closeClients() {
        let all = clients.withLock { c in defer { c = [:] }; return c.values.map(\.channel) }
        for channel in all { channel.close(promise: nil) }
    }

    /// Stops listening, removes the socket and closes every client (they take over or reattach).
    func stop() {
        guard stopped.withLock({ s in defer { s = true }; return !s }) else { return }
        unlink(path)
        server.close(promise: nil)
        let all = clients.withLock { c in defer { c = [:] }; return c.values.map(\.channel) }
        for channel in all { channel.close(promise: nil) }
    }
}
