import Foundation
import HearthCore
import HearthIdentity
import HearthTransport
import Logging
import NIOCore

/// One authenticated connection to a peer device running the sync protocol (docs/protocol.md)
/// for every store both devices serve: hello both ways, then per shared store the state each
/// side lacks, each side's delta of what the other lacks, pushes as changes happen,
/// acknowledgements; heartbeats for the connection as a whole.
///
/// Three tasks share the connection: a reader (verifies and applies what arrives), a
/// writer (the only one that writes, so frames never interleave), and a heartbeat that
/// finds dead links. The first to end ends the session.
final class SyncSession: Sendable {
    enum Outcome: Sendable {
        /// The connection ended after the hello exchange (peer closed, error, or replaced).
        case ended
        /// Refused by the duplicate rule before any data: another connection to this peer won.
        case duplicate
        /// The peer refused our certificate as revoked: it says this device was removed.
        case removedByPeer
        /// The peer is a device removed from the account.
        case peerRemoved
    }

    /// A store both ends serve, as this connection sees it.
    struct Shared: Sendable {
        let store: SyncStore
        /// Whether we know what the peer has of it (equal hello digests, or its `store`
        /// message): deltas wait until then.
        var ready = false
        /// What the peer is known to have: its vector, what we sent, what it acknowledged.
        var peerKnown = VersionVector()
        /// What the peer has confirmed having (its vector, acks and pings).
        var acknowledged = VersionVector()
        /// The last vector of ours the peer was told (hello digest, state, ack or ping).
        var told: VersionVector?
        /// Whether our `store` message has been sent (or posted) on this connection.
        var sentState = false
        /// Certificates sent with this store's deltas: the peer keeps them, so each goes once.
        var sentCertificates = Set<Data>()
        /// Whether the deltas received so far are the first batch (the initial download),
        /// which lasts until a delta without `more`.
        var inFirstBatch = true
    }

    struct Stores: Sendable {
        /// The stores the peer said it serves (hello, `store` messages), at most
        /// ``SyncMessage/maximumStores``.
        var served = Set<String>()
        var shared: [String: Shared] = [:]
        /// The last state the peer sent of a store this device could not take up then (a
        /// daemon's provider finding it open in an app). The peer will not send it again: if
        /// the store is attached later, ``announce(_:)`` replays it.
        var ignored: [String: SyncMessage.StoreState] = [:]
    }

    let peer: TLSPeer
    /// The device that dialled this connection (for the duplicate rule).
    let initiator: DeviceID
    let context: SyncEngine.Context
    /// The engine this session belongs to (weak: a session never keeps a stopped engine alive).
    weak let engine: SyncEngine?
    let mailbox = Locked(SessionMailbox())
    let stores = Locked(Stores())
    /// Wakes the writer; holds at most one wake-up (the mailbox holds what to send).
    private let wakeUp: AsyncStream<Void>.Continuation
    private let wakeUps: AsyncStream<Void>
    let lastHeard = Locked(ContinuousClock.now)
    let lastSent = Locked(ContinuousClock.now)
    private let closed = Locked(false)
    /// Set once the peer's hello is verified; before that no ping may be sent.
    let greeted = Locked(false)
    /// Whether the peer's hello carried a removals digest: older builds are sent no removals.
    let peerKnowsRemovals = Locked(false)
    /// Renewals on this connection: whether the peer understands them, whether we asked it for a
    /// certificate, whether it asked us (kept, so a CA unlocked later can still answer), and
    /// whether we issued it one (once per connection).
    let renewal = Locked((peerRenews: false, asked: false, askedByPeer: false, issued: false))
    /// Closes the channel: the way to stop the reader, which waits on the socket.
    private let closeChannel = Locked<(@Sendable () -> Void)?>(nil)
    /// Entries of this connection refused for a bad or unknown signature, and how many are
    /// tolerated (a relay may pass on an entry whose signer's certificate it lacks, once).
    let forgedEntries = Locked(0)
    static let maximumForgedEntries = 64
    let logger: Logger

    init(peer: TLSPeer, initiatedLocally: Bool, context: SyncEngine.Context, engine: SyncEngine) {
        self.peer = peer
        initiator = initiatedLocally ? context.identity.deviceID : peer.deviceID
        self.context = context
        self.engine = engine
        (wakeUps, wakeUp) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        var logger = context.logger
        logger[metadataKey: "peer"] = "\(peer)"
        self.logger = logger
    }

    /// The stores our hello listed (set when it is sent): a store attached or detached around
    /// the hellos is told about with a `store` message instead.
    let listedInHello = Locked<Set<String>?>(nil)

    /// Whether the peer serves `store` too and this connection syncs it.
    /// Both ends serve `store` on this connection: ours is open here, and the peer listed it in
    /// its hello or sent its state since (a store we announced and it ignores is not shared).
    func shares(_ store: String) -> Bool { stores.withLock { $0.shared[store] != nil && $0.served.contains(store) } }

    /// What the peer has confirmed having of `store`; `nil` if this connection does not sync it.
    func acknowledgedVector(of store: String) -> VersionVector? {
        stores.withLock { $0.shared[store]?.acknowledged }
    }

    /// Asks the writer to send every removal we know (we learned one since the hellos).
    func relayRemovals() {
        guard peerKnowsRemovals.withLock({ $0 }) else { return }
        post { $0.removals = true }
    }

    /// Set when the peer was removed: the writer closes the connection once it has sent the
    /// removals (so the peer learns why, with the signed record).
    let expelled = Locked(false)

    /// Sends the peer the removals that name it, then closes; closes at once if it cannot be
    /// told (an older build), and in any case within a second (a peer that does not read).
    func expel() {
        guard peerKnowsRemovals.withLock({ $0 }) else { close(); return }
        expelled.withLock { $0 = true }
        post { $0.removals = true }
        Task { [weak self] in
            try? await Task.sleep(for: .seconds(1))
            self?.close()
        }
    }

    /// Asks the peer for a renewed certificate, once per connection, if ours is within its
    /// renewal window and the peer understands renewals.
    func askForRenewalIfDue() {
        guard let engine, engine.certificateIsDue else { return }
        let ask = renewal.withLock { r -> Bool in
            guard r.peerRenews, !r.asked else { return false }
            r.asked = true
            return true
        }
        if ask { post { $0.renew = true } }
    }

    /// Asks the writer to send whatever the peer lacks of `store` now.
    func push(_ store: String) {
        guard shares(store) else { return }
        post(store) { $0.delta = true }
    }

    /// Records what to send and wakes the writer.
    func post(_ change: (inout SessionMailbox) -> Void) {
        mailbox.withLock(change)
        wakeUp.yield()
    }

    func post(_ store: String, _ change: (inout SessionMailbox.StoreMail) -> Void) {
        post { $0.post(store, change) }
    }

    /// Ends the session (its connection closes).
    func close() {
        closed.withLock { $0 = true }
        wakeUp.finish()
        closeChannel.withLock { $0 }?()
    }

    func fail(_ error: any Error) {
        if !closed.withLock({ $0 }) { logger.notice("closing the connection: \(error)") }
        closeChannel.withLock { $0 }?()
    }

    // MARK: Stores coming and going

    /// Starts syncing `store` on this connection, as the peer's hello listed it.
    func open(_ store: SyncStore, as listed: SyncMessage.Hello.Store) {
        store.keep(peerCertificate: peer.certificate, of: peer.deviceID)
        let (ours, vector) = store.announcement()
        // Equal digests mean something only if the peer had ours: our hello listed the store.
        let inOurHello = listedInHello.withLock { $0?.contains(store.identifier) ?? false }
        let same = inOurHello && listed.vectorDigest == ours.vectorDigest
        let samePeers = inOurHello && listed.peersDigest == ours.peersDigest
        let opened = stores.withLock { s -> Bool in
            guard s.shared[store.identifier] == nil else { return false }
            var shared = Shared(store: store)
            if same {
                // The peer has exactly what we have: nothing to tell, nothing to send.
                shared.ready = true
                shared.peerKnown = vector
                shared.acknowledged = vector
                shared.told = vector
            }
            shared.sentState = !same || !samePeers
            s.shared[store.identifier] = shared
            return true
        }
        guard opened else { return }
        if same {
            // Known from now on: tombstones it lacks are kept until it has them.
            store.replica.notePeer(peer.deviceID.hex, acknowledged: vector)
            // The peer has nothing we lack: the first download is done, and empty.
            if store.replica.awaitingInitialSync { store.replica.initialSyncCompleted() }
        }
        if !same || !samePeers {
            post(store.identifier) { mail in
                mail.state = true
                mail.peers = !samePeers
            }
        }
    }

    /// Starts syncing `store`, attached on this device since the hellos: the peer is told our
    /// vector and, if it serves the store (or its store provider takes it up, as a device
    /// daemon's does), answers with its own; deltas wait for that answer. A peer that serves
    /// it not ignores the message, as it would have ignored the store in our hello.
    func announce(_ store: SyncStore) {
        let announced = stores.withLock { s -> Bool in
            guard s.shared[store.identifier] == nil else { return false }
            var shared = Shared(store: store)
            shared.sentState = true
            s.shared[store.identifier] = shared
            return true
        }
        guard announced else { return }
        store.keep(peerCertificate: peer.certificate, of: peer.deviceID)
        post(store.identifier) { mail in
            mail.state = true
            mail.peers = true
        }
        // The peer told its state before this device had the store: it counts as its answer.
        if let state = stores.withLock({ $0.ignored.removeValue(forKey: store.identifier) }) { receive(state) }
    }

    /// Stops syncing `store` (detached on this device) and tells the peer.
    func leave(_ store: String) {
        let left = stores.withLock { $0.shared.removeValue(forKey: store) != nil }
        guard left else { return }
        post { mailbox in mailbox.stores[store] = SessionMailbox.StoreMail(left: true) }
    }

    // MARK: Running

    func run(_ connection: PeerConnection) async -> Outcome {
        let channel = connection.channel.channel
        closeChannel.withLock { $0 = { channel.close(promise: nil) } }
        do {
            return try await connection.executeThenClose { inbound, outbound in
                try await withThrowingTaskGroup(of: Void.self, returning: Outcome.self) { group in
                    defer { group.cancelAll() }
                    group.addTask {
                        do { try await self.writeLoop(outbound) } catch is CancellationError {} catch { self.fail(error) }
                    }
                    // From the start: a peer that never says hello is dropped like a silent one.
                    group.addTask {
                        do { try await self.heartbeat() } catch is CancellationError {} catch { self.fail(error) }
                    }
                    post { $0.hello = true }
                    // The reader runs here, in the parent task, so the inbound stream never crosses tasks.
                    var greeted = false
                    for try await frame in inbound {
                        lastHeard.withLock { $0 = .now }
                        context.metrics.received(bytes: frame.readableBytes + 4)
                        // Until the peer has proved who it is, only a small frame is even decoded.
                        if !greeted, frame.readableBytes > SyncMessage.maximumHelloSize {
                            throw SyncProtocolError("a first frame of \(frame.readableBytes) bytes, more than a hello may take (\(SyncMessage.maximumHelloSize))")
                        }
                        let message = try SyncMessage(decoding: Data(frame.readableBytesView))
                        if !greeted {
                            let hello = try receiveHello(message)
                            switch engine?.register(self) {
                            case .accepted?: break
                            case .removed?:
                                logger.notice("the peer was removed from the account; closing the connection")
                                return .peerRemoved
                            case .duplicate?, nil:
                                logger.debug("another connection to this peer is kept; closing this one")
                                return .duplicate
                            }
                            greeted = true
                            self.greeted.withLock { $0 = true }
                            context.metrics.sessionStarted()
                            greet(hello)
                            logger.info("connected", metadata: ["stores": "\(stores.withLock { $0.shared.count })"])
                            continue
                        }
                        try await handle(message)
                    }
                    if greeted { engine?.unregister(self) }
                    return greeted ? .ended : .duplicate
                }
            }
        } catch {
            engine?.unregister(self)
            if let tls = error as? TLSError, tls.code == .removedByPeer {
                return .removedByPeer
            }
            if !closed.withLock({ $0 }) { logger.notice("connection closed: \(error)") }
            return .ended
        }
    }

    /// Opens every store the hello lists that this device serves (or its store provider
    /// creates); the others are the peer's alone.
    private func greet(_ hello: SyncMessage.Hello) {
        if let digest = hello.removalsDigest {
            peerKnowsRemovals.withLock { $0 = true }
            // Different removals: send ours (the peer sends its own; each merges the other's).
            if let removals = engine?.removals, !removals.isEmpty, digest != removals.digest {
                post { $0.removals = true }
            }
        }
        renewal.withLock { $0.peerRenews = hello.renews }
        askForRenewalIfDue()
        stores.withLock { $0.served = Set(hello.stores.map(\.identifier)) }
        for listed in hello.stores {
            if let store = engine?.store(listed.identifier) {
                open(store, as: listed)
            } else if engine?.provide(listed.identifier) == nil {
                logger.debug("the peer serves store \(String(reflecting: listed.identifier)), which this device does not")
            }
        }
        // Our hello is not made yet: it will list every store attached until then (and attach()
        // announces the later ones, this session being registered now).
        guard let listed = listedInHello.withLock({ $0 }) else { return }
        // Listed in our hello but detached since: the peer must not wait for us to sync it.
        let gone = listed.filter { engine?.store($0) == nil }
        for name in gone { post { $0.stores[name] = SessionMailbox.StoreMail(left: true) } }
        // Attached since our hello was made, but before this session was registered: attach()
        // announced it to the sessions registered then, not to this one, so the peer would
        // never hear of it on this connection (a hub's daemon missed a store that way).
        for identifier in engine?.storeIdentifiers ?? [] where !listed.contains(identifier) {
            if let store = engine?.store(identifier) { announce(store) }
        }
    }

    private func receiveHello(_ message: SyncMessage) throws -> SyncMessage.Hello {
        guard case .hello(let hello) = message else {
            throw SyncProtocolError("the first message was not a hello")
        }
        guard hello.protocolVersion == SyncMessage.protocolVersion else {
            throw SyncProtocolError("peer speaks protocol \(hello.protocolVersion), we speak \(SyncMessage.protocolVersion); no data exchanged")
        }
        guard hello.account == context.identity.account.id.hex else {
            throw SyncProtocolError("peer is of account \(hello.account.prefix(8)), we are \(context.identity.account.id.hex.prefix(8)); no data exchanged")
        }
        guard hello.device == peer.deviceID.data else {
            throw SyncProtocolError("hello names device \(Hex.encode(hello.device.prefix(4))), TLS authenticated \(peer.deviceID.short)")
        }
        guard let key = peer.certificate.publicKey, key.isValidSignature(hello.signature, for: hello.signingBytes) else {
            throw SyncProtocolError("the hello's signature does not verify")
        }
        return hello
    }

    private func writeLoop(_ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws {
        for await _ in wakeUps {
            while let item = mailbox.withLock({ $0.next() }) {
                try await send(item, to: outbound)
                if case .removals = item, expelled.withLock({ $0 }) {
                    close()
                    return
                }
            }
        }
    }

    func send(_ message: SyncMessage, to outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws {
        let payload = try message.encoded()
        context.metrics.sent(bytes: payload.count + 4)
        lastSent.withLock { $0 = .now }
        try await outbound.write(ByteBuffer(bytes: payload))
    }

    /// Pings when this side has sent nothing for a heartbeat interval (so an idle link costs
    /// one small frame each way per interval, whatever the number of stores), re-stamps what
    /// a clock set right again stamped, and drops a link silent for the timeout.
    private func heartbeat() async throws {
        let helloTimeout = min(context.options.timeout, .seconds(5))
        let interval = context.options.heartbeatInterval
        // Checked a few times per timeout, so a dead link is noticed within timeout × 4/3 at most.
        let tick = min(interval, context.options.timeout / 3)
        while true {
            let greeted = self.greeted.withLock { $0 }
            try await Task.sleep(for: greeted ? tick : min(tick, helloTimeout))
            let silence = ContinuousClock.now - lastHeard.withLock { $0 }
            guard self.greeted.withLock({ $0 }) else {
                if silence > helloTimeout { throw SyncProtocolError(.silent, "no hello from the peer within \(helloTimeout)") }
                continue
            }
            askForRenewalIfDue()
            // A clock that was ahead and has been set right: re-stamp what it stamped (pushed at once).
            for store in stores.withLock({ $0.shared.values.map(\.store) }) { _ = store.replica.restampIfNeeded() }
            if silence > context.options.timeout {
                throw SyncProtocolError(.silent, "no frame from the peer for \(silence); the link is dead")
            }
            if ContinuousClock.now - lastSent.withLock({ $0 }) >= interval - tick / 10 {
                post { $0.ping = true }
            }
        }
    }
}
