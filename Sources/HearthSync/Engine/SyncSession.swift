import Foundation
import HearthCore
import HearthIdentity
import HearthTransport
import Logging
import NIOCore

/// One authenticated connection running the sync protocol (docs/protocol.md):
/// hello both ways, then each side's delta of what the other lacks, then pushes as changes
/// happen, acknowledgements, and heartbeats.
///
/// Three tasks share the connection: a reader (verifies and applies what arrives), a
/// writer (the only one that writes, so frames never interleave), and a heartbeat that
/// finds dead links. The first to end ends the session.
final class SyncSession: Sendable {
    enum Outgoing: Sendable {
        /// Our hello, first on every connection.
        case hello
        /// Send what the peer lacks, if anything.
        case delta
        case ack(VersionVector)
        case ping, pong
        /// The devices we know of (the hellos showed the peer knows others).
        case peers
    }

    enum Outcome: Sendable {
        /// The connection ended after the hello exchange (peer closed, error, or replaced).
        case ended
        /// Refused by the duplicate rule before any data: another connection to this peer won.
        case duplicate
    }

    let peer: TLSPeer
    /// The device that dialled this connection (for the duplicate rule).
    let initiator: DeviceID
    private let context: SyncEngine.Context
    private let outgoing: AsyncStream<Outgoing>.Continuation
    private let outgoingStream: AsyncStream<Outgoing>
    /// What the peer is known to have: its hello vector, what we sent, what it acknowledged.
    private let peerKnown = Locked(VersionVector())
    /// Certificates this connection has carried: the peer keeps them, so each goes once.
    private let sentCertificates = Locked(Set<Data>())
    /// What the peer has confirmed having (its hello, acks and pings).
    private let acknowledged = Locked(VersionVector())
    private let lastHeard = Locked(ContinuousClock.now)
    private let closed = Locked(false)
    /// Set once the peer's hello is verified; before that no ping may be sent.
    private let greeted = Locked(false)
    /// Closes the channel: the way to stop the reader, which waits on the socket.
    private let closeChannel = Locked<(@Sendable () -> Void)?>(nil)
    private let logger: Logger

    init(peer: TLSPeer, initiatedLocally: Bool, context: SyncEngine.Context) {
        self.peer = peer
        initiator = initiatedLocally ? context.identity.deviceID : peer.deviceID
        self.context = context
        (outgoingStream, outgoing) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        var logger = context.logger
        logger[metadataKey: "peer"] = "\(peer)"
        self.logger = logger
    }

    /// Whether the peer has confirmed having everything in `vector`.
    func hasAcknowledged(_ vector: VersionVector) -> Bool {
        acknowledged.withLock { $0.dominates(vector) }
    }

    /// Asks the writer to send whatever the peer lacks now.
    func push() { outgoing.yield(.delta) }

    /// Ends the session (its connection closes).
    func close() {
        closed.withLock { $0 = true }
        outgoing.finish()
        closeChannel.withLock { $0 }?()
    }

    private func fail(_ error: any Error) {
        if !closed.withLock({ $0 }) { logger.notice("closing the connection: \(error)") }
        closeChannel.withLock { $0 }?()
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
                    outgoing.yield(.hello)
                    // The reader runs here, in the parent task, so the inbound stream never crosses tasks.
                    var greeted = false
                    for try await frame in inbound {
                        lastHeard.withLock { $0 = .now }
                        context.metrics.received(bytes: frame.readableBytes + 4)
                        let message = try SyncMessage(decoding: Data(frame.readableBytesView))
                        if !greeted {
                            let hello = try receiveHello(message)
                            // The peer's certificate came with TLS; its deltas need not carry it.
                            if (try? context.certificates.admit(peer.certificate)) != nil {
                                context.replica.keepCertificate(Data(peer.certificate.derEncoded), signer: peer.deviceID.data)
                            }
                            guard context.engine?.register(self) == true else {
                                logger.debug("another connection to this peer is kept; closing this one")
                                return .duplicate
                            }
                            greeted = true
                            self.greeted.withLock { $0 = true }
                            context.metrics.sessionStarted()
                            peerKnown.withLock { $0 = hello.vector }
                            acknowledged.withLock { $0 = hello.vector }
                            // The peer has nothing we lack: the first download is done, and empty.
                            if context.replica.awaitingInitialSync, context.replica.syncVector.dominates(hello.vector) {
                                context.replica.initialSyncCompleted()
                            }
                            // Known from now on: tombstones it lacks are kept until it has them. So are
                            // the devices it knows of, which may hold values older than a delete we have
                            // seen and they have not (a device away since before this one joined).
                            // Compared with what we know now, the peer included: a difference costs one
                            // `peers` message each way, agreement costs nothing more.
                            let ours = context.peersDigest
                            context.replica.notePeer(peer.deviceID.hex, acknowledged: hello.vector)
                            if hello.peersDigest != ours { outgoing.yield(.peers) }
                            outgoing.yield(.delta)
                            logger.info("connected")
                            continue
                        }
                        try await handle(message)
                    }
                    if greeted { context.engine?.unregister(self) }
                    return greeted ? .ended : .duplicate
                }
            }
        } catch {
            context.engine?.unregister(self)
            if !closed.withLock({ $0 }) { logger.notice("connection closed: \(error)") }
            return .ended
        }
    }

    private func send(_ message: SyncMessage, to outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws {
        let payload = message.encoded()
        context.metrics.sent(bytes: payload.count + 4)
        try await outbound.write(ByteBuffer(bytes: payload))
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
        guard hello.store == context.replica.storeIdentifier else {
            throw SyncProtocolError("peer syncs store \(String(reflecting: hello.store)), we sync \(String(reflecting: context.replica.storeIdentifier)); no data exchanged")
        }
        guard hello.device == peer.deviceID.data else {
            throw SyncProtocolError("hello names device \(hello.device.prefix(4).map { String(format: "%02x", $0) }.joined()), TLS authenticated \(peer.deviceID.short)")
        }
        guard let key = peer.certificate.publicKey, key.isValidSignature(hello.signature, for: hello.signingBytes) else {
            throw SyncProtocolError("the hello's signature does not verify")
        }
        return hello
    }

    private func writeLoop(_ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws {
        for await item in outgoingStream {
            switch item {
            case .hello: try await send(.hello(context.makeHello()), to: outbound)
            case .delta:
                let known = peerKnown.withLock { $0 }
                try context.signPending()
                var (entries, vector) = context.replica.syncDelta(for: known)
                // A write made since signPending() is signed here; never send an unsigned entry.
                entries = try context.signed(entries)
                // Nothing the peer lacks (its hello showed it has it all, or an earlier delta
                // carried these writes): send nothing. The peer drew the same conclusion from our
                // hello (see below), so an empty first delta is not needed to end its initial sync.
                guard !entries.isEmpty || !known.dominates(vector) else { continue }
                let certificates = context.certificates(for: entries, excluding: sentCertificates.withLock { $0 })
                sentCertificates.withLock { $0.formUnion(certificates) }
                try await send(.delta(.init(entries: entries, certificates: certificates, vector: vector)), to: outbound)
                context.metrics.sentEntries(entries.count)
                peerKnown.withLock { $0.formUnion(vector) }
            case .ack(let vector): try await send(.ack(vector), to: outbound)
            case .ping: try await send(.ping(context.replica.syncVector), to: outbound)
            case .pong: try await send(.pong, to: outbound)
            case .peers: try await send(.peers(Array(context.knownDevices.prefix(SyncMessage.maximumPeers))), to: outbound)
            }
        }
    }

    private let deltasReceived = Locked(0)

    private func handle(_ message: SyncMessage) async throws {
        switch message {
        case .delta(let delta):
            let initial = deltasReceived.withLock { n in defer { n += 1 }; return n == 0 }
            try await apply(delta, initial: initial)
        case .ack(let vector):
            peerKnown.withLock { $0.formUnion(vector) }
            acknowledged.withLock { $0.formUnion(vector) }
            context.replica.notePeer(peer.deviceID.hex, acknowledged: vector)
        case .ping(let vector):
            acknowledged.withLock { $0.formUnion(vector) }
            context.replica.notePeer(peer.deviceID.hex, acknowledged: vector)
            outgoing.yield(.pong)
        case .pong: break
        case .peers(let devices):
            let ours = context.identity.deviceID.data
            context.replica.learnOfDevices(devices.filter { $0 != ours }.map { Hex.encode($0) })
        case .hello: throw SyncProtocolError("a second hello")
        }
    }

    /// Verifies every entry before applying any: one bad entry refuses the whole delta and
    /// ends the connection.
    private func apply(_ delta: SyncMessage.Delta, initial: Bool) async throws {
        // Entries that lose to what we hold change nothing and are dropped; every entry that
        // would be applied is verified first (in a mesh most relayed entries are duplicates).
        let winners = context.replica.winningEntries(delta.entries)
        do {
            try await context.verify(delta, applying: winners)
        } catch {
            logger.error("refused a delta of \(delta.entries.count) entries: \(error); nothing applied")
            throw error
        }
        let reason: ChangeReason = initial && context.replica.awaitingInitialSync ? .initialSyncChange : .serverChange
        let changed = context.replica.applyRemote(winners, coveredBy: delta.vector, reason: reason)
        if reason == .initialSyncChange { context.replica.initialSyncCompleted() }
        context.metrics.receivedEntries(delta.entries.count)
        peerKnown.withLock { $0.formUnion(delta.vector) }
        // An empty delta teaches the peer nothing new about us: its hello already did.
        if !delta.entries.isEmpty { outgoing.yield(.ack(context.replica.syncVector)) }
        if !changed.isEmpty {
            logger.debug("applied \(delta.entries.count) entries; changed \(changed.count) keys")
            // Relay: other peers may lack what this one brought.
            context.engine?.changed()
        }
    }

    private func heartbeat() async throws {
        let helloTimeout = min(context.options.timeout, .seconds(5))
        while true {
            try await Task.sleep(for: min(context.options.heartbeatInterval, helloTimeout))
            let silence = ContinuousClock.now - lastHeard.withLock { $0 }
            guard greeted.withLock({ $0 }) else {
                if silence > helloTimeout { throw SyncProtocolError("no hello from the peer within \(helloTimeout)") }
                continue
            }
            if silence > context.options.timeout {
                throw SyncProtocolError("no frame from the peer for \(silence); the link is dead")
            }
            outgoing.yield(.ping)
        }
    }
}
