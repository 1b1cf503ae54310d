import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import HearthTransport
import Logging
import NIOCore

/// Sync engines of one process linked directly, with no sockets and no TLS: for tests of the
/// sync protocol that must run fast and the same way every time.
///
/// Each engine made with ``environment(clock:random:)`` (or ``maker``) listens on a port of this
/// network and dials others by port (the host is ignored). A link is two FIFO queues of frames;
/// each frame is length-prefixed and split again on arrival, with the same cap as on TCP, and
/// the session still encodes and decodes every message. What the handshake checks is checked
/// here too, minus the handshake: each side's certificate must be a device certificate of the
/// other's account trust, valid at ``date``, of a device not removed; a removed device that
/// dials is handed the removal notice (``TLSConfiguration/removalNotice``) or refused as
/// revoked, as the TLS layer does.
///
/// ```swift
/// let network = InMemoryNetwork()
/// let a = try SyncEngine(identity: phone, replica: notesA, environment: network.environment(), logger: logger)
/// let b = try SyncEngine(identity: laptop, replica: notesB, environment: network.environment(), logger: logger)
/// let port = try await b.start()
/// try await a.start()
/// a.addPeer(host: "memory", port: port)
/// ```
///
/// Given ``eventLoops``, each end of a link runs its session on a loop of that group, as a TLS
/// link's runs on its channel's loop; a group of one loop runs every session of the network on
/// one thread. Without, sessions run where the engines' tasks run: the cooperative pool, or the
/// household simulator's executor (`hearth-sim`, which must see every job to decide its order). A link has no
/// backpressure: a writer never waits for its peer to read (what a peer that stops reading costs
/// is a TLS test's to show, `CompromisedDeviceTests`).
///
/// A test waits for what the engines do with ``until(_:deadline:_:)``: the condition is checked
/// again each time an engine on this network signals a change (a session comes or goes, a
/// message handled, a stop) or a link or listener comes or goes, never on a timer.
package final class InMemoryNetwork: Sendable {
    private struct State {
        var listeners: [Int: Listener] = [:]
        var nextPort = 10_000
        var linksMade = 0
        var linksInUse = 0
        /// The ``SyncEngine/changes`` of every engine made on this network (``environment(clock:random:)``).
        var engineChanges: [ChangeSignal] = []
    }

    private let state = Locked(State())
    /// Signalled when an engine joins the network, a listener opens or closes, a link is made,
    /// and after a link's session has ended (its last message handled).
    package let changes = ChangeSignal()
    /// The date certificates are checked at.
    package let date: @Sendable () -> Date
    /// Where the sessions of this network's links run: each link end on a loop of this group;
    /// nil, where the engines' tasks run.
    package let eventLoops: (any EventLoopGroup)?

    package init(date: @escaping @Sendable () -> Date = { Date() }, eventLoops: (any EventLoopGroup)? = nil) {
        self.date = date
        self.eventLoops = eventLoops
    }

    /// Makes each engine's endpoint on this network (``SyncEnvironment/network``).
    package var maker: @Sendable (PeerNetworkSetup) throws -> any PeerNetwork {
        { [self] setup in Endpoint(network: self, setup: setup) }
    }

    /// An engine environment on this network, with `clock` and `random`. The default clock
    /// stamps on the system's wall clock and times heartbeats, link timeouts and back-off on
    /// ``RunTime``, which does not count this process's stalls: both ends of a link live in this
    /// process, so a stall would make each call the other silent (a link here dies only when a
    /// test ends it).
    package func environment(clock: SyncClock = RunTime.syncClock, random: SyncRandom = .system) -> SyncEnvironment {
        var environment = SyncEnvironment(clock: clock, random: random, network: maker)
        environment.observeChanges = { [self] engineChanges in
            state.withLock { $0.engineChanges.append(engineChanges) }
            changes.signal()   // a waiter follows the new engine from now on
        }
        return environment
    }

    /// What a wait on this network follows: its own changes and every engine's.
    package var signals: [ChangeSignal] { [changes] + state.withLock(\.engineChanges) }

    /// Waits until `condition` holds, checking it now and again after each change an engine on
    /// this network or the network itself signals; throws, naming `what`, if it still does not
    /// hold at `deadline`. The deadline only bounds a failure: a test never relies on it.
    ///
    /// ```swift
    /// a.set("v", forKey: "k")
    /// try await network.until("B to apply A's write") { b.string(forKey: "k") == "v" }
    /// ```
    package func until(_ what: @autoclosure () -> String, deadline: Duration = .seconds(30), _ condition: () -> Bool) async throws {
        guard await Self.wait(for: deadline, observing: { signals }, condition) else {
            throw InMemoryNetworkError("timed out after \(deadline) waiting for \(what())")
        }
    }

    /// Whether `condition` held before `bound` passed on ``RunTime`` (a stall of this process
    /// does not count), checked at once and after each change of `observing`. Seen to hold only
    /// at the bound counts as not: no event announced the change (a signal missing in the code
    /// under test), and a test must not pass by timing.
    package static func wait(for bound: Duration, observing: () -> [ChangeSignal], _ condition: () -> Bool) async -> Bool {
        await RunTime.wait(for: bound, observing: observing, condition)
    }

    /// A port no listener of this network has or will be given by port 0 (to listen on later,
    /// at a fixed port, as ``LoopbackCluster`` does).
    package func reservePort() -> Int {
        state.withLock { s in defer { s.nextPort += 1 }; return s.nextPort }
    }

    /// How many links have been made (each accepted dial counts once).
    package var linksMade: Int { state.withLock { $0.linksMade } }

    /// How many link ends a session runs on now: once the engines are idle, both ends of each
    /// link they keep (a link closed as a duplicate counts once its sessions have ended).
    package var linksInUse: Int { state.withLock { $0.linksInUse } }

    fileprivate func linkInUse(_ delta: Int) {
        state.withLock { $0.linksInUse += delta }
        changes.signal()
    }

    /// The ports listened on now.
    package var ports: [Int] { state.withLock { $0.listeners.keys.sorted() } }

    fileprivate func bind(_ endpoint: Endpoint, port: Int) throws -> Listener {
        let listener = try state.withLock { s in
            // Port 0: the next free one (a fixed port may have been taken past the counter).
            while port == 0, s.listeners[s.nextPort] != nil { s.nextPort += 1 }
            let chosen = port == 0 ? s.nextPort : port
            guard s.listeners[chosen] == nil else {
                throw InMemoryNetworkError("port \(chosen) of the in-memory network is in use")
            }
            if port == 0 { s.nextPort += 1 }
            let listener = Listener(network: self, endpoint: endpoint, port: chosen)
            s.listeners[chosen] = listener
            return listener
        }
        changes.signal()
        return listener
    }

    fileprivate func unbind(_ listener: Listener) {
        state.withLock { s in
            if s.listeners[listener.number] === listener { s.listeners[listener.number] = nil }
        }
        changes.signal()
    }

    fileprivate func connect(from client: Endpoint, port: Int, expecting: DeviceID?) throws -> any PeerLink {
        guard let listener = state.withLock({ $0.listeners[port] }) else {
            throw InMemoryNetworkError("nothing listens on port \(port) of the in-memory network (connection refused)")
        }
        let server = listener.endpoint
        let now = date()
        // What each side's handshake checks: the dialler the listener's certificate first.
        let serverPeer = try client.authenticate(server.identity.certificate, at: now)
        if let expecting, expecting != serverPeer.deviceID {
            throw TLSError(code: .unexpectedPeer, reason: "dialled \(expecting.short), reached \(serverPeer.deviceID.short)")
        }
        let clientPeer: TLSPeer
        do {
            clientPeer = try server.authenticate(client.identity.certificate, at: now)
        } catch let error as TLSError where error.code == .peerRemoved {
            let device = client.identity.deviceID
            server.logger.notice("in-memory connection refused", metadata: ["code": "\(error.code)", "device": "\(device.short)"])
            // A listener with a notice hands the removed device its signed record and closes;
            // one without refuses it with an alert, which a TLS 1.3 client reads as its first read.
            let refused = Pipe(maximumFrameLength: Frame.maximumLength)
            if let notice = server.removalNotice?(device) {
                refused.deliverRaw(notice, to: 0)
                refused.close()
            } else {
                refused.close(throwing: TLSError(code: .removedByPeer, reason: "the peer refused this device's certificate as revoked"))
            }
            return InMemoryLink(peer: serverPeer, pipe: refused, side: 0, network: self, eventLoop: eventLoops?.next())
        } catch {
            // In TLS 1.3 the client learns of the refusal on its first read.
            let refused = Pipe(maximumFrameLength: Frame.maximumLength)
            refused.close(throwing: TLSError(code: .protocolError, reason: "the peer refused this device's certificate: \(error)"))
            return InMemoryLink(peer: serverPeer, pipe: refused, side: 0, network: self, eventLoop: eventLoops?.next())
        }
        let pipe = Pipe(maximumFrameLength: Frame.maximumLength)
        let dialled = InMemoryLink(peer: serverPeer, pipe: pipe, side: 0, network: self, eventLoop: eventLoops?.next())
        let accepted = InMemoryLink(peer: clientPeer, pipe: pipe, side: 1, network: self, eventLoop: eventLoops?.next())
        guard listener.accept(accepted) else {
            pipe.close()
            throw InMemoryNetworkError("the listener on port \(port) of the in-memory network closed (connection refused)")
        }
        state.withLock { $0.linksMade += 1 }
        changes.signal()
        return dialled
    }

    /// One engine's place on the network.
    fileprivate final class Endpoint: PeerNetwork {
        let network: InMemoryNetwork
        private let current: Locked<DeviceIdentity>
        let removals: DeviceRemovals?
        let removalNotice: (@Sendable (DeviceID) -> [UInt8]?)?
        let logger: Logger

        init(network: InMemoryNetwork, setup: PeerNetworkSetup) {
            self.network = network
            current = Locked(setup.identity)
            removals = setup.removals
            removalNotice = setup.removalNotice
            logger = setup.logger
        }

        var identity: DeviceIdentity { current.withLock { $0 } }

        /// The checks the TLS layer makes of a peer's certificate (``AccountTrust/validateDevice(_:at:)``
        /// against this device's account, then the removals), with the errors it throws.
        func authenticate(_ certificate: Certificate, at date: Date) throws -> TLSPeer {
            let device: DeviceID
            do {
                device = try identity.account.trust.validateDevice(certificate, at: date)
            } catch {
                throw TLSError.certificateRejected("\(error)")
            }
            if removals?.isRemoved(device) == true {
                throw TLSError(code: .peerRemoved, reason: "the peer's device was removed from the account")
            }
            return TLSPeer(deviceID: device, certificate: certificate)
        }

        func listenForLinks(host: String, port: Int) async throws -> any PeerLinkListener {
            try network.bind(self, port: port)
        }

        func dial(host: String, port: Int, expecting: DeviceID?) async throws -> any PeerLink {
            try network.connect(from: self, port: port, expecting: expecting)
        }

        func replaceIdentity(_ identity: DeviceIdentity) throws {
            current.withLock { $0 = identity }
        }
    }

    fileprivate final class Listener: PeerLinkListener {
        let network: InMemoryNetwork
        let endpoint: Endpoint
        let number: Int
        var port: Int? { number }
        private let links: AsyncStream<any PeerLink>
        private let continuation: AsyncStream<any PeerLink>.Continuation

        init(network: InMemoryNetwork, endpoint: Endpoint, port: Int) {
            self.network = network
            self.endpoint = endpoint
            number = port
            (links, continuation) = AsyncStream.makeStream()
        }

        func accept(_ link: InMemoryLink) -> Bool {
            if case .enqueued = continuation.yield(link) { return true }
            return false
        }

        func forEachLink(_ handle: (any PeerLink) async -> Void) async {
            for await link in links { await handle(link) }
        }

        func close() async {
            network.unbind(self)
            continuation.finish()
        }
    }
}

/// A failure of the in-memory network (a port in use, nothing listening).
package struct InMemoryNetworkError: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}

/// The two directions of one link: side 0 (the dialler) reads `inbound[0]`, side 1 reads `inbound[1]`.
final class Pipe: Sendable {
    private struct State {
        var continuations: [AsyncThrowingStream<ByteBuffer, any Error>.Continuation]
        var closed = false
    }

    let inbound: [AsyncThrowingStream<ByteBuffer, any Error>]
    private let state: Locked<State>
    private let maximumFrameLength: Int

    init(maximumFrameLength: Int) {
        self.maximumFrameLength = maximumFrameLength
        let (a, ca) = AsyncThrowingStream<ByteBuffer, any Error>.makeStream()
        let (b, cb) = AsyncThrowingStream<ByteBuffer, any Error>.makeStream()
        inbound = [a, b]
        state = Locked(State(continuations: [ca, cb]))
    }

    /// Sends `frames` from `side` to the other, in order: each framed as on the wire and split
    /// again, so a frame over the cap fails the link as ``FrameDecoder`` would.
    func send(_ frames: [ByteBuffer], from side: Int) throws {
        var bytes: [UInt8] = []
        for frame in frames { bytes += Frame.encode(frame.readableBytesView) }
        try state.withLock { s in
            guard !s.closed else { throw TLSError.closed() }
            try Self.deliver(bytes, to: s.continuations[1 - side], maximumFrameLength: maximumFrameLength)
        }
    }

    /// Bytes (whole frames) for `side` to read, as a peer writing below the framing does.
    func deliverRaw(_ bytes: [UInt8], to side: Int) {
        state.withLock { s in
            do { try Self.deliver(bytes, to: s.continuations[side], maximumFrameLength: maximumFrameLength) } catch {
                s.continuations[side].finish(throwing: error)
            }
        }
    }

    private static func deliver(_ bytes: [UInt8], to continuation: AsyncThrowingStream<ByteBuffer, any Error>.Continuation,
                                maximumFrameLength: Int) throws {
        var buffer = ByteBuffer(bytes: bytes)
        while buffer.readableBytes > 0 {
            guard let length = buffer.readInteger(endianness: .big, as: UInt32.self) else {
                throw FrameError(code: .truncated, reason: "the stream ended inside a length prefix")
            }
            guard length > 0 else { throw FrameError(code: .zeroLength, reason: "a frame of length 0") }
            guard Int(length) <= maximumFrameLength else { throw FrameError.tooLarge(length, cap: maximumFrameLength) }
            guard let payload = buffer.readSlice(length: Int(length)) else {
                throw FrameError(code: .truncated, reason: "the stream ended inside a frame")
            }
            continuation.yield(payload)
        }
    }

    /// Ends both directions: what was sent is still read, then each side's inbound ends (or throws `error`).
    func close(throwing error: (any Error)? = nil) {
        let continuations = state.withLock { s -> [AsyncThrowingStream<ByteBuffer, any Error>.Continuation] in
            guard !s.closed else { return [] }
            s.closed = true
            return s.continuations
        }
        for continuation in continuations { continuation.finish(throwing: error) }
    }
}

/// One end of an in-memory link.
final class InMemoryLink: PeerLink {
    struct Writer: PeerLinkWriter {
        let pipe: Pipe
        let side: Int
        func writeFrames(_ frames: [ByteBuffer]) async throws { try pipe.send(frames, from: side) }
    }

    let peer: TLSPeer
    let pipe: Pipe
    let side: Int
    /// The network, told when a session starts and ends on this end (``InMemoryNetwork/linksInUse``).
    let network: InMemoryNetwork
    /// Where the session on this end runs (``InMemoryNetwork/eventLoops``).
    let eventLoop: (any EventLoop)?

    init(peer: TLSPeer, pipe: Pipe, side: Int, network: InMemoryNetwork, eventLoop: (any EventLoop)?) {
        self.peer = peer
        self.pipe = pipe
        self.side = side
        self.network = network
        self.eventLoop = eventLoop
    }

    func executeThenClose<Result>(
        _ body: (_ inbound: AsyncThrowingStream<ByteBuffer, any Error>, _ outbound: Writer) async throws -> Result
    ) async throws -> Result {
        // Signalled after the session's last message (a link refused before any hello ends no
        // session of the engine's, so the engine signals nothing for it).
        network.linkInUse(1)
        defer {
            pipe.close()
            network.linkInUse(-1)
        }
        return try await body(pipe.inbound[side], Writer(pipe: pipe, side: side))
    }

    func close() async { pipe.close() }
    func closeSoon() { pipe.close() }
}
