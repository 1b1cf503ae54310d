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
    /// What the writer owes the peer. Coalesced, not queued: a peer that stops reading while
    /// this device keeps changing costs a few flags and one vector, never a growing queue
    /// (what the peer lacks is computed when the writer gets to it, as one delta).
    struct Mailbox: Sendable {
        /// Our hello, first on every connection.
        var hello = false
        /// The devices we know of (the hellos showed the peer knows others).
        var peers = false
        /// Entries of the peer's deltas that were not applied, for a `refused` message.
        var refused: [RefusedEntry] = []
        var refusedClock: UInt64 = 0
        /// Send what the peer lacks, if anything.
        var delta = false
        /// Our vector after applying the peer's delta (the latest replaces an unsent one).
        var ack: VersionVector?
        var ping = false
        var pong = false

        var isEmpty: Bool { !hello && !peers && refused.isEmpty && !delta && ack == nil && !ping && !pong }

        /// The next thing to send, in the order the protocol wants (the hello first, a refusal
        /// before the ack of the same delta), taken out of the mailbox.
        mutating func next() -> Outgoing? {
            if hello { hello = false; return .hello }
            if peers { peers = false; return .peers }
            if !refused.isEmpty {
                defer { refused = [] }
                return .refused(.init(entries: refused, clock: refusedClock))
            }
            if delta { delta = false; return .delta }
            if let vector = ack { ack = nil; return .ack(vector) }
            if ping { ping = false; return .ping }
            if pong { pong = false; return .pong }
            return nil
        }
    }

    enum Outgoing: Sendable {
        case hello, peers, delta, ping, pong
        case ack(VersionVector)
        case refused(SyncMessage.Refusal)
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
    private let mailbox = Locked(Mailbox())
    /// Wakes the writer; holds at most one wake-up (the mailbox holds what to send).
    private let wakeUp: AsyncStream<Void>.Continuation
    private let wakeUps: AsyncStream<Void>
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
        (wakeUps, wakeUp) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        var logger = context.logger
        logger[metadataKey: "peer"] = "\(peer)"
        self.logger = logger
    }

    /// What the peer has confirmed having (its hello, acks and pings).
    var acknowledgedVector: VersionVector {
        acknowledged.withLock { $0 }
    }

    /// Asks the writer to send whatever the peer lacks now.
    func push() { post { $0.delta = true } }

    /// Records what to send and wakes the writer.
    private func post(_ change: (inout Mailbox) -> Void) {
        mailbox.withLock(change)
        wakeUp.yield()
    }

    /// Ends the session (its connection closes).
    func close() {
        closed.withLock { $0 = true }
        wakeUp.finish()
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
                            // Cut to the origins we know: counters for others decide nothing we send.
                            let claimed = hello.vector.restricted(to: context.replica.syncVector)
                            peerKnown.withLock { $0 = claimed }
                            acknowledged.withLock { $0 = claimed }
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
                            context.replica.notePeer(peer.deviceID.hex, acknowledged: claimed)
                            post { mailbox in
                                mailbox.peers = hello.peersDigest != ours
                                mailbox.delta = true
                            }
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
        let payload = try message.encoded()
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
        for await _ in wakeUps {
            while let item = mailbox.withLock({ $0.next() }) {
                try await send(item, to: outbound)
            }
        }
    }

    /// Sends one item; a write suspends while the peer does not read (NIO's backpressure), and
    /// meanwhile what is posted coalesces in the mailbox.
    private func send(_ item: Outgoing, to outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws {
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
            guard !entries.isEmpty || !known.dominates(vector) else { return }
            // A big batch (a newcomer's first download) goes as several deltas, each well under the
            // frame cap and the receiver's entry limit; the last one says the batch is complete.
            let parts = Self.split(entries)
            for (index, part) in parts.enumerated() {
                let certificates = context.certificates(for: part, excluding: sentCertificates.withLock { $0 })
                sentCertificates.withLock { $0.formUnion(certificates) }
                let delta = SyncMessage.Delta(entries: part, certificates: certificates, vector: vector, more: index < parts.count - 1)
                try await send(.delta(delta), to: outbound)
                context.metrics.sentEntries(part.count)
            }
            peerKnown.withLock { $0.formUnion(vector) }
        case .ack(let vector): try await send(SyncMessage.ack(vector), to: outbound)
        case .refused(let refusal): try await send(SyncMessage.refused(refusal), to: outbound)
        case .ping: try await send(.ping(context.replica.syncVector), to: outbound)
        case .pong: try await send(SyncMessage.pong, to: outbound)
        case .peers: try await send(.peers(Array(context.knownDevices.prefix(SyncMessage.maximumPeers))), to: outbound)
        }
    }

    /// Splits entries into deltas of at most ``SyncMessage/maximumDeltaEntries`` entries and
    /// about a megabyte of values (one value may be up to 1 MB: a part holds at least one entry).
    static func split(_ entries: [Entry]) -> [[Entry]] {
        var parts: [[Entry]] = [[]]
        var bytes = 0
        for entry in entries {
            let size = 128 + (entry.value?.canonicalSize ?? 0)
            if !parts[parts.count - 1].isEmpty,
               parts[parts.count - 1].count >= SyncMessage.maximumDeltaEntries || bytes + size > 1_100_000 {
                parts.append([])
                bytes = 0
            }
            parts[parts.count - 1].append(entry)
            bytes += size
        }
        return parts
    }

    /// Entries of this connection refused for a bad or unknown signature, and how many are
    /// tolerated (a relay may pass on an entry whose signer's certificate it lacks, once).
    private let forgedEntries = Locked(0)
    static let maximumForgedEntries = 64

    /// Whether the deltas received so far are the first batch (the initial download), which
    /// lasts until a delta without `more`.
    private let inFirstBatch = Locked(true)

    private func handle(_ message: SyncMessage) async throws {
        switch message {
        case .delta(let delta):
            let initial = inFirstBatch.withLock { first in defer { if !delta.more { first = false } }; return first }
            try await apply(delta, initial: initial)
        case .ack(let claimed):
            let vector = claimed.restricted(to: context.replica.syncVector)
            peerKnown.withLock { $0.formUnion(vector) }
            acknowledged.withLock { $0.formUnion(vector) }
            context.replica.notePeer(peer.deviceID.hex, acknowledged: vector)
        case .ping(let claimed):
            let vector = claimed.restricted(to: context.replica.syncVector)
            acknowledged.withLock { $0.formUnion(vector) }
            context.replica.notePeer(peer.deviceID.hex, acknowledged: vector)
            post { $0.pong = true }
        case .pong: break
        case .peers(let devices):
            let ours = context.identity.deviceID.data
            context.replica.learnOfDevices(devices.filter { $0 != ours }.map { Hex.encode($0) })
        case .refused(let refusal):
            guard let fresh = context.engine?.note(refusal, from: peer.deviceID), !fresh.isEmpty else { return }
            logger.warning("the peer refused \(fresh.count) entr\(fresh.count == 1 ? "y" : "ies") this device sent; the rest was applied: \(Self.summary(fresh))")
        case .hello: throw SyncProtocolError("a second hello")
        }
    }

    /// Checks every entry, applies those that pass as one batch, and tells the peer about
    /// the others: one bad entry is refused alone, and the link stays up.
    private func apply(_ delta: SyncMessage.Delta, initial: Bool) async throws {
        let checked = await context.check(delta)
        // An honest device never sends an entry whose signature fails; one that keeps doing so
        // is made to pay a new connection (a TLS handshake) for every few of them.
        let forged = checked.refused.filter { [.badSignature, .unknownSigner, .originMismatch].contains($0.reason) }.count
        if forged > 0, forgedEntries.withLock({ $0 += forged; return $0 }) > Self.maximumForgedEntries {
            throw SyncProtocolError("the peer sent more than \(Self.maximumForgedEntries) entries whose signature does not verify; closing")
        }
        let reason: ChangeReason = initial && context.replica.awaitingInitialSync ? .initialSyncChange : .serverChange
        let (changed, overQuota) = context.replica.applyRemote(checked.accepted, heldBack: checked.heldBack, reason: reason)
        if reason == .initialSyncChange, !delta.more { context.replica.initialSyncCompleted() }
        context.metrics.receivedEntries(delta.entries.count)
        let ours = context.replica.syncVector
        peerKnown.withLock { $0.formUnion(delta.vector.restricted(to: ours)) }
        let refused = checked.refused + overQuota
        if !refused.isEmpty {
            let count = delta.entries.count + delta.undecodable.count
            logger.warning("refused \(refused.count) of \(count) entries from the peer, applied the rest, and told the peer: \(Self.summary(refused))")
            let clock = context.replica.wallMilliseconds()
            post { mailbox in
                // Bounded like the message that carries them: past the cap the peer hears of the rest next time.
                mailbox.refused = Array((mailbox.refused + refused).prefix(SyncMessage.maximumRefusals))
                mailbox.refusedClock = clock
            }
        }
        // An empty delta teaches the peer nothing new about us: its hello already did.
        if !delta.entries.isEmpty || !delta.undecodable.isEmpty {
            let vector = context.replica.syncVector
            post { $0.ack = vector }
        }
        if !changed.isEmpty {
            logger.debug("applied \(checked.accepted.count) entries; changed \(changed.count) keys")
            // Relay: other peers may lack what this one brought.
            context.engine?.changed()
        }
    }

    /// The first few items, for a log line.
    private static func summary(_ items: [some CustomStringConvertible]) -> String {
        items.prefix(8).map(\.description).joined(separator: "; ") + (items.count > 8 ? "; …" : "")
    }

    private func heartbeat() async throws {
        let helloTimeout = min(context.options.timeout, .seconds(5))
        while true {
            try await Task.sleep(for: min(context.options.heartbeatInterval, helloTimeout))
            // A clock that was ahead and has been set right: re-stamp what it stamped (pushed at once).
            context.replica.restampIfNeeded()
            let silence = ContinuousClock.now - lastHeard.withLock { $0 }
            guard greeted.withLock({ $0 }) else {
                if silence > helloTimeout { throw SyncProtocolError("no hello from the peer within \(helloTimeout)") }
                continue
            }
            if silence > context.options.timeout {
                throw SyncProtocolError("no frame from the peer for \(silence); the link is dead")
            }
            post { $0.ping = true }
        }
    }
}
