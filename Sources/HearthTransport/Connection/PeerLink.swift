import HearthIdentity
import Logging
import NIOCore

/// An authenticated, ordered, reliable link to another device of the account: what the sync
/// engine runs a session over, whatever carries the bytes.
///
/// ``PeerConnection`` (TLS over TCP) is the production link; HearthTesting's `InMemoryNetwork`
/// links engines of one process directly, for tests. Frames are payloads without their length
/// prefix. The inbound sequence ends when the peer closes cleanly and throws when the link fails
/// (``TLSError``, ``FrameError``): it never just hangs.
package protocol PeerLink: Sendable {
    associatedtype Inbound: AsyncSequence & Sendable where Inbound.Element == ByteBuffer
    associatedtype Outbound: PeerLinkWriter

    /// The peer, its certificate verified against the account's trust (and not removed).
    var peer: TLSPeer { get }
    /// The event loop the link's bytes are on: the session on the link runs its reader and
    /// writer there (``EventLoopTaskExecutor``). A TLS link's is its channel's; an in-memory
    /// link's, one of the group its network was given (one loop for every link makes a whole
    /// household run on one thread). Nil: the session runs where its caller's tasks run (the
    /// cooperative pool, or the household simulator's executor, which must see every job).
    var eventLoop: (any EventLoop)? { get }

    /// Runs `body` with the inbound frames and the outbound writer, then closes.
    func executeThenClose<Result>(
        _ body: (_ inbound: Inbound, _ outbound: Outbound) async throws -> Result
    ) async throws -> Result

    /// Closes without reading or writing (for links the caller decides not to use).
    func close() async

    /// Starts closing from any thread, without waiting: the inbound sequence then ends (how a
    /// session stops its reader).
    func closeSoon()
}

/// Writes frames to a link, in order; suspends while the peer does not read, where the link
/// has backpressure.
package protocol PeerLinkWriter: Sendable {
    func writeFrames(_ frames: [ByteBuffer]) async throws
}

/// Listens for links from other devices (``PeerNetwork/listenForLinks(host:port:)``).
package protocol PeerLinkListener: Sendable {
    /// The port peers dial (port 0 asked for any free one).
    var port: Int? { get }
    /// Calls `handle` with each link accepted, in order, until the listener closes.
    func forEachLink(_ handle: (any PeerLink) async -> Void) async
    /// Stops accepting; links already handed out stay open.
    func close() async
}

/// Where a sync engine gets its links: listens for and dials other devices of the account.
/// ``PeerTransport`` (TLS over TCP) in production.
package protocol PeerNetwork: Sendable {
    func listenForLinks(host: String, port: Int) async throws -> any PeerLinkListener
    /// Dials `host:port`; the link's peer is authenticated (`expecting`, when given, is the only
    /// device accepted). A peer that refuses this device may still end the link before any frame.
    func dial(host: String, port: Int, expecting: DeviceID?) async throws -> any PeerLink
    /// Presents `identity` (the same key, a renewed certificate) on links made from now on.
    func replaceIdentity(_ identity: DeviceIdentity) throws
}

/// What a network needs to know of the engine it serves (``PeerNetwork``'s maker).
package struct PeerNetworkSetup: Sendable {
    package var identity: DeviceIdentity
    /// The account's removals: a removed device's links are refused, as the handshake refuses them.
    package var removals: DeviceRemovals?
    /// The bytes (one frame) a removed device that dials is told, as ``TLSConfiguration/removalNotice``.
    package var removalNotice: (@Sendable (DeviceID) -> [UInt8]?)?
    package var logger: Logger

    package init(identity: DeviceIdentity, removals: DeviceRemovals?, removalNotice: (@Sendable (DeviceID) -> [UInt8]?)?,
                 logger: Logger) {
        self.identity = identity
        self.removals = removals
        self.removalNotice = removalNotice
        self.logger = logger
    }
}

// MARK: TLS over TCP

extension NIOAsyncChannelOutboundWriter: PeerLinkWriter where OutboundOut == ByteBuffer {
    package func writeFrames(_ frames: [ByteBuffer]) async throws {
        try await write(contentsOf: frames)
    }
}

extension PeerConnection: PeerLink {
    package var eventLoop: (any EventLoop)? { channel.channel.eventLoop }
    package func closeSoon() { channel.channel.close(promise: nil) }
}

extension PeerListener: PeerLinkListener {
    package func forEachLink(_ handle: (any PeerLink) async -> Void) async {
        for await connection in connections { await handle(connection) }
    }
}

extension PeerTransport: PeerNetwork {
    package func listenForLinks(host: String, port: Int) async throws -> any PeerLinkListener {
        try await listen(host: host, port: port)
    }

    package func dial(host: String, port: Int, expecting: DeviceID?) async throws -> any PeerLink {
        try await connect(host: host, port: port, expecting: expecting)
    }

    /// The production network: TLS over TCP on the shared event loop group.
    package static func network(_ setup: PeerNetworkSetup) throws -> any PeerNetwork {
        try PeerTransport(identity: setup.identity, removals: setup.removals, removalNotice: setup.removalNotice, logger: setup.logger)
    }

    /// The production network on `group`'s event loops (a device's own group).
    package static func network(on group: any EventLoopGroup) -> @Sendable (PeerNetworkSetup) throws -> any PeerNetwork {
        { setup in
            try PeerTransport(identity: setup.identity, removals: setup.removals, removalNotice: setup.removalNotice,
                              logger: setup.logger, group: group)
        }
    }
}
