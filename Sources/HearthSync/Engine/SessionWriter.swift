import Foundation
import HearthCore
import HearthTransport
import Logging
import NIOCore

/// A session's writer: the only one that writes to its link, so frames never interleave. It
/// empties the state's mailbox each time it is woken and turns each item into a frame: our
/// state and vectors read from the replicas, deltas computed as ``DeltaPlan`` says, signed by
/// the store's one signer and encoded once for all links (``SyncStore/payload(of:sender:)``).
///
/// Its session makes one when its link is up (``SyncSession/runWriter(_:)``). It owns the link's
/// outbound side (the ``FrameBatch``); the protocol's state is the session's, which it reads and
/// changes on the session's loop, isolated to the session it is given, with no hop or lock.
struct SessionWriter {
    /// The frames encoded and not yet handed to the link.
    private let outbound: FrameBatch

    init(_ link: any PeerLinkWriter) {
        outbound = FrameBatch(link)
    }

    /// Sends what the mailbox holds each time the session wakes the writer, until the link ends.
    func run(on session: isolated SyncSession) async throws {
        for await _ in session.wakeUps {
            while let item = session.state.next() {
                try await send(item, on: session)
                if case .removals = item, session.state.expelled {
                    try await outbound.flush()
                    session.closeNow()
                    return
                }
            }
            // The mailbox is empty: what it held goes out in one flush (one TLS record when small).
            try await outbound.flush()
            // An ack left alone waits for other mail, or for the ack delay.
            if session.state.mailbox.heldAcksNeedTimer() { session.armAckTimer() }
        }
    }

    /// Sends `message`, encoded here unless its `payload` was made already (a delta shared by
    /// several links: ``SyncStore/payload(of:sender:)``).
    func send(_ message: SyncMessage, payload made: ByteBuffer? = nil, on session: isolated SyncSession) async throws {
        // The link ended while this item waited (a delta posted before a peer left, sent after
        // a write made since): it would go nowhere.
        if session.state.linkEnded { throw CancellationError() }
        let payload = try made ?? ByteBuffer(bytes: message.encoded(sender: session.context.identity.deviceID.data))
        session.logger.trace("sent", metadata: ["message": "\(message.kind)", "bytes": "\(payload.readableBytes + 4)"])
        session.context.metrics.sent(bytes: payload.readableBytes + 4, type: message.kind)
        let now = session.context.clock.now()
        session.state.sent(at: now)
        session.state.mailbox.frameSent()
        if !message.isHeartbeat { session.state.active(at: now) }
        try await outbound.append(payload)
    }

    /// Sends one item; a write suspends while the peer does not read (NIO's backpressure), and
    /// meanwhile what is posted coalesces in the mailbox.
    func send(_ item: SessionOutgoing, on session: isolated SyncSession) async throws {
        switch item {
        case .hello:
            guard let hello = session.engine?.makeHello() else { throw CancellationError() }
            session.state.helloSent(listing: Set(hello.stores.map(\.identifier)),
                                    inline: Set(hello.stores.filter { $0.vector != nil }.map(\.identifier)))
            try await send(.hello(hello), on: session)
        case .removals:
            guard let removals = session.engine?.removals.all, !removals.isEmpty else { return }
            try await send(.removals(Array(removals.prefix(SyncMessage.maximumRemovals))), on: session)
        case .renew: try await send(SyncMessage.renew, on: session)
        case .certificate(let der): try await send(SyncMessage.certificate(der), on: session)
        case .state(let name, let withPeers):
            guard let store = session.state.shared[name]?.store else { return }
            let vector = store.replica.syncVector
            let peers = withPeers ? store.knownDevices.prefix(SyncMessage.maximumPeers).map(\.data) : nil
            session.state.told(vector, of: name)
            let whole = session.state.takeWholeRequest(of: name)
            try await send(.store(.init(store: name, vector: vector, peers: peers, whole: whole)), on: session)
        case .left(let name):
            try await send(.store(.init(store: name, left: true)), on: session)
        case .delta(let name):
            try await sendDelta(of: name, on: session)
        case .ack(var ack):
            // With what of it we have saved, when that is less: peers collect tombstones on that.
            if let store = session.state.shared[ack.store]?.store {
                let saved = store.replica.durableVector.intersection(ack.vector)
                if saved != ack.vector { ack.durable = saved }
            }
            session.state.told(ack.vector, of: ack.store)
            session.state.toldSaved(ack.saved, of: ack.store)
            try await send(SyncMessage.ack(ack), on: session)
        case .refused(let refusal): try await send(SyncMessage.refused(refusal), on: session)
        case .links:
            // Sorted, so that the same set is the same list (and not told twice).
            let devices = (session.engine?.linkedDevices(except: session.peer.deviceID) ?? []).prefix(SyncMessage.maximumPeers).map(\.data)
            guard session.state.linksToTell(devices) else { return }
            // With our vectors: the peer then resumes, for a link that is gone, from what we have.
            try await send(.links(.init(devices: devices, stores: changedVectors(on: session))), on: session)
        case .ping:
            try await send(.ping(changedVectors(on: session)), on: session)
        case .pong:
            // On a sparse link the answerer never pings: its pong says what changed here.
            try await send(.pong(session.state.sparse ? changedVectors(on: session) : [:]), on: session)
        }
    }

    /// The saved vectors of the ready stores that changed since the peer was last told them (now
    /// noted as told), for a ping or links: what we keep through a crash, on which peers collect
    /// tombstones (what we hold in memory goes in acks and `store` messages).
    private func changedVectors(on session: isolated SyncSession) -> [String: VersionVector] {
        let ready = session.state.pingBasis
        var changed: [String: VersionVector] = [:]
        for (name, (store, told)) in ready {
            let replica = store.replica
            let vector = replica.durableVector.intersection(replica.syncVector)
            if vector != told { changed[name] = vector }
        }
        for (name, vector) in changed { session.state.toldSaved(vector, of: name) }
        return changed
    }

    private func sendDelta(of name: String, on session: isolated SyncSession) async throws {
        // Read once: the basis forgets what was deferred to writers not among them, the plan
        // leaves out those among them the peer is linked to.
        let sharers = session.engine?.sharers(of: name) ?? []
        guard let (store, known, linked) = session.state.deltaBasis(of: name, sharers: sharers) else { return }
        try await store.signPending()
        // Direct first: what the peer's links will bring it is left out (DeltaPlan decides).
        var plan = DeltaPlan(known: known, linked: linked, sharers: sharers,
                             us: session.context.identity.deviceID, peer: session.peer.deviceID, vector: store.replica.syncVector)
        let basis = plan.basis
        var (entries, vector) = store.replica.syncDelta(for: basis)
        entries = plan.leavingOut(entries, vector: vector)
        // A write made since signPending() is signed by the one signer too (so each write is
        // signed once, whichever sessions send it); never send an unsigned entry. A writer
        // that outruns the signer three times over gets the rest signed here.
        for _ in 0..<3 where entries.contains(where: { $0.signature == nil }) {
            try await store.signPending()
            (entries, vector) = store.replica.syncDelta(for: basis)
            entries = plan.leavingOut(entries, vector: vector)
        }
        entries = try store.signed(entries)
        guard plan.worthSending(entries: entries.count, vector: vector) else {
            session.state.deltaSent(VersionVector(), deferred: plan.deferred, of: name)
            return
        }
        // A big batch (a newcomer's first download) goes as several deltas, each well under the
        // frame cap and the receiver's entry limit; the last one says the batch is complete.
        let parts = Self.split(entries)
        for (index, part) in parts.enumerated() {
            let sent = session.state.shared[name]?.sentCertificates ?? []
            let candidates = store.certificates(for: part, excluding: sent)
            let certificates = session.state.certificatesToSend(candidates, of: name)
            let delta = SyncMessage.Delta(store: name, entries: part, certificates: certificates, vector: vector,
                                          more: index < parts.count - 1)
            try await send(.delta(delta), payload: store.payload(of: delta, sender: session.context.identity.deviceID.data), on: session)
            session.context.metrics.sentEntries(part.count)
        }
        session.state.deltaSent(plan.sent(vector), deferred: plan.deferred, of: name)
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
}
