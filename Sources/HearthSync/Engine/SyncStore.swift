import Foundation
import HearthCore
import HearthDiscovery
import HearthIdentity
import HearthTransport
import Logging
import NIOCore

/// One store attached to a ``SyncEngine``: what the engine's connections need to sync it, and
/// what its owner asks about it (who has it, what was refused).
///
/// ```swift
/// let engine = try SyncEngine(identity: identity)
/// let notes = try engine.attach(notesReplica)
/// let todo = try engine.attach(todoReplica)
/// try await engine.start()          // one listener, one connection per peer device, both stores
/// notes.isSettled                   // every connected peer serving "notes" has every write
/// engine.detach(storeIdentifier: "todo")
/// ```
package final class SyncStore: Sendable {
    /// The store identifier that entries are signed for.
    package let identifier: String
    /// The store's replica behind this attachment's gate (see ``ReplicaGate``): closed by
    /// ``SyncEngine/detach(storeIdentifier:)`` and ``SyncEngine/stop()``.
    let replica: ReplicaGate
    let logger: Logger
    private let certificates: DeviceCertificateCache
    private let identity: DeviceIdentity
    /// What peers refused of what we sent, by refusing device; pruned of entries that are
    /// no longer current.
    private let refused = Locked<[DeviceID: [SyncRefusal]]>([:])
    /// The one signer of pending local writes: whether a session is signing, and the sessions
    /// waiting for it to finish (they then find those writes signed, and sign only newer ones).
    private let signing = Locked(Signer())
    private struct Signer {
        var busy = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private weak let engine: SyncEngine?
    /// The peers asked for their whole store (``askEveryPeerForWhole()``) whose answer has not
    /// come yet: the request holds until each has answered or left.
    private let wholeAwaited = Locked<Set<DeviceID>>([])
    /// The last delta encoded for this store's sessions, and its frame payload (``payload(of:sender:)``).
    private let lastDelta = Locked<(delta: SyncMessage.Delta, payload: ByteBuffer)?>(nil)

    init(replica: any SyncReplica, identity: DeviceIdentity, certificates: DeviceCertificateCache, logger: Logger, engine: SyncEngine) {
        identifier = replica.storeIdentifier
        self.replica = ReplicaGate(replica)
        self.identity = identity
        self.certificates = certificates
        var logger = logger
        logger[metadataKey: "store"] = "\(replica.storeIdentifier)"
        self.logger = logger
        self.engine = engine
    }

    // MARK: A removed device's later writes

    /// Drops the entries of each removed device stamped after its removal, which this device
    /// took before it heard of it (a thief's copy of the removed device met while away): every
    /// device that knows of the removal refuses them, so they must go here too or the household
    /// never agrees again. Returns whether any went: then the peers' whole store is wanted, since
    /// what those entries replaced is covered by this replica's vector (docs/protocol.md, "Device removals").
    @discardableResult
    func dropRemovedWrites(_ removals: [DeviceRemoval]) -> Bool {
        var dropped = 0
        for removal in removals {
            let count = replica.dropEntries(signedBy: removal.device.data, stampedAfter: removal.removedAt)
            guard count > 0 else { continue }
            dropped += count
            logger.notice("dropped \(count) entr\(count == 1 ? "y" : "ies") of device \(removal.device.short) (\(removal.deviceName)) stamped after its removal at \(removal.date); asking peers for their whole store")
        }
        return dropped > 0
    }

    /// Whether peers are to be asked for their whole store (``dropRemovedWrites(_:)``, in this
    /// run or one before it that stopped first: the replica keeps it).
    var wantsWhole: Bool { replica.wantsWhole }

    /// Asks every peer this store is synced with for its whole store (our next `store` message
    /// says `w`) and gives it ours, each once per connection (``SessionState/askForWhole(_:)``):
    /// every one, as the first to answer may have dropped the same entries and lack what they
    /// replaced, and a peer that dropped nothing may hold an older value that its vector says it
    /// has beaten (docs/simulator.md, finding 10).
    func askEveryPeerForWhole() {
        let sessions = engine?.sessions(sharing: identifier) ?? []
        wholeAwaited.withLock { $0.formUnion(sessions.map(\.peer.deviceID)) }
        for session in sessions { session.askForWhole(self) }
    }

    /// `peer`'s whole store came in: once every peer asked (and still linked) has answered,
    /// what the dropped entries had replaced is here.
    func wholeReceived(from peer: DeviceID) {
        let linked = Set((engine?.sessions(sharing: identifier) ?? []).map(\.peer.deviceID))
        let done = wholeAwaited.withLock { awaited in
            awaited.remove(peer)
            awaited.formIntersection(linked)
            return awaited.isEmpty
        }
        if done { replica.wholeReceived() }
    }

    // MARK: What the owner asks

    /// The engine's frame and entry counters (every store of the engine together).
    package var metrics: SyncMetrics { engine?.metrics ?? SyncMetrics() }

    /// Signalled when what ``connectedPeers``, ``isSettled`` and ``settledPeers`` say may have
    /// changed (the engine's ``SyncEngine/changes``); a stopped engine's never is again.
    package var changes: ChangeSignal? { engine?.changes }

    /// The devices connected right now that serve this store too.
    package var connectedPeers: [DeviceID] {
        (engine?.sessions(sharing: identifier) ?? []).map(\.peer.deviceID)
    }

    /// The peers discovery reports right now (for every store of the engine).
    package var discoveredPeers: [DiscoveredPeer] { engine?.discoveredPeers ?? [] }

    /// Whether at least one peer serving this store is connected and every such peer has
    /// confirmed having every current entry of it, but those it refused (so a process may exit
    /// without its writes being lost to the others).
    package var isSettled: Bool {
        let sessions = engine?.sessions(sharing: identifier) ?? []
        return !sessions.isEmpty && settled(sessions).count == sessions.count
    }

    /// The connected devices serving this store that have confirmed having every current entry
    /// of it, but those they refused.
    package var settledPeers: [DeviceID] {
        settled(engine?.sessions(sharing: identifier) ?? [])
    }

    private func settled(_ sessions: [SyncSession]) -> [DeviceID] {
        sessions.filter { session in
            guard let acknowledged = session.acknowledgedVector(of: identifier) else { return false }
            let refusals = self.refusals(by: session.peer.deviceID)
            return replica.syncDelta(for: acknowledged).entries.allSatisfy { entry in
                refusals.contains { $0.entry.refers(to: entry) }
            }
        }.map(\.peer.deviceID)
    }

    /// Sends every connected peer serving this store what it lacks, now (`synchronize()` calls
    /// it; local writes and applied deltas already do).
    package func pushNow() { engine?.changed(identifier) }

    /// Dials `host:port` for the engine (every store it serves); see ``SyncEngine/addPeer(host:port:)``.
    package func addPeer(host: String, port: Int) { engine?.addPeer(host: host, port: port) }

    // MARK: Refusals

    /// What connected or past peers refused of what this device sent, while the refused entry
    /// is still this replica's current entry of its key (a later write, or a re-stamp, ends it).
    package var refusals: [SyncRefusal] {
        prunedRefusals().values.flatMap { $0 }
    }

    func refusals(by device: DeviceID) -> [SyncRefusal] {
        prunedRefusals()[device] ?? []
    }

    private func prunedRefusals() -> [DeviceID: [SyncRefusal]] {
        let all = refused.withLock { $0 }
        guard !all.isEmpty else { return [:] }
        var current: [StoreKey: Entry?] = [:]
        let kept = all.mapValues { list in
            list.filter { refusal in
                guard let key = refusal.entry.key else { return false }
                if current[key] == nil { current[key] = .some(replica.entry(forKey: key)) }
                return current[key]!.map { refusal.entry.refers(to: $0) } ?? false
            }
        }.filter { !$0.value.isEmpty }
        refused.withLock { $0 = kept }
        return kept
    }

    /// At most this many refusals are kept per device (a peer cannot grow the list without bound).
    static let maximumRefusalsPerDevice = 1024

    /// Records what `device` refused; returns the refusals not recorded before (worth a log line).
    func note(_ refusal: SyncMessage.Refusal, from device: DeviceID) -> [SyncRefusal] {
        let now = replica.wallMilliseconds()
        let incoming = refusal.entries.map { entry in
            // A write stamped ahead because the value it replaced was: the refusal says so.
            let imposed = entry.reason == .clockAhead
                ? entry.key.flatMap { key in entry.origin.flatMap { origin in entry.sequence.flatMap { replica.imposedLead(forKey: key, origin: origin, sequence: $0) } } }
                : nil
            // Another device's entry this device relayed: not this device's clock either.
            let relayed = entry.origin.map { !$0.isBound(to: identity.deviceID.data) } ?? false
            return SyncRefusal(device: device, entry: entry, peerClock: refusal.clock, localClock: now, imposedLead: imposed, relayed: relayed)
        }
        return refused.withLock { table in
            var list = table[device] ?? []
            // The same entry refused again (a held-back entry comes with every delta until it is
            // taken) is not news, whatever its detail says now (it names the receiver's clock).
            func same(_ a: RefusedEntry, _ b: RefusedEntry) -> Bool {
                a.key == b.key && a.origin == b.origin && a.sequence == b.sequence && a.reason == b.reason
            }
            let fresh = incoming.filter { new in !list.contains { same($0.entry, new.entry) } }
            list.append(contentsOf: fresh)
            table[device] = Array(list.suffix(Self.maximumRefusalsPerDevice))
            return fresh
        }
    }

    // MARK: What the sessions need

    /// The other devices this replica knows of.
    var knownDevices: [DeviceID] {
        replica.knownDevices.filter { $0 != identity.deviceID }
    }

    /// The digest of what this replica knows of the household, itself included: what a
    /// hello carries, and what a peer's hello is compared with.
    var peersDigest: Data {
        SyncMessage.peersDigest((knownDevices + [identity.deviceID]).map(\.data))
    }

    /// This store as a hello lists it, with the vector the digest is of.
    func announcement() -> (store: SyncMessage.Hello.Store, vector: VersionVector) {
        let vector = replica.syncVector
        return (.init(identifier: identifier, vectorDigest: SyncMessage.vectorDigest(vector), peersDigest: peersDigest), vector)
    }

    /// Signs local writes that are not signed yet, off the writer's path, each once: one
    /// session signs at a time, and a session that finds another signing waits for it (a few
    /// tenths of a millisecond for a handful of writes) rather than sign the same writes again.
    /// Signing happens outside the replica's lock.
    func signPending() async throws {
        await acquireSigner()
        defer { releaseSigner() }
        let pending = replica.unsignedEntries()
        guard !pending.isEmpty else { return }
        let (identity, identifier) = (identity, identifier)
        @Sendable func sign() throws -> [Entry] { try pending.map { try identity.signed($0, storeIdentifier: identifier) } }
        // A burst of writes is signed on the global executor, not on a connection's event loop.
        let signed = pending.count < Self.verifiedInPlace ? try sign()
            : try await withTaskExecutorPreference(globalConcurrentExecutor) { try sign() }
        replica.attachSignatures(signed)
        metrics.signedEntries(signed.count)
    }

    private func acquireSigner() async {
        guard !signing.withLock({ s in defer { s.busy = true }; return !s.busy }) else { return }
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            // The signer may have finished since: then it is ours at once.
            let free = signing.withLock { s -> Bool in
                guard s.busy else { s.busy = true; return true }
                s.waiting.append(waiter)
                return false
            }
            if free { waiter.resume() }
        }
    }

    /// Hands the signer to the next waiting session (it stays busy), or frees it.
    private func releaseSigner() {
        let next = signing.withLock { s -> CheckedContinuation<Void, Never>? in
            guard !s.waiting.isEmpty else { s.busy = false; return nil }
            return s.waiting.removeFirst()
        }
        next?.resume()
    }

    /// Deltas of at most this many entries share their encoding between sessions: the changes
    /// pushed as they happen. Larger ones (a newcomer's download, different per link) are each
    /// encoded apart, outside any lock, and are not kept.
    static let sharedEncodingLimit = 64

    /// The frame payload of `delta`, sent by `sender`: made once for every session that sends
    /// the same delta. A change pushed to every peer is the same message on each link (the same
    /// entries and vector, and no certificate: the peer has ours from the handshake), so it is
    /// encoded once and the same bytes are written to each link.
    func payload(of delta: SyncMessage.Delta, sender: Data) throws -> ByteBuffer {
        let metrics = self.metrics
        func encode() throws -> ByteBuffer {
            metrics.deltaEncoded()
            return ByteBuffer(bytes: try SyncMessage.delta(delta).encoded(sender: sender))
        }
        guard delta.entries.count <= Self.sharedEncodingLimit else { return try encode() }
        // Encoded under the lock (tens of microseconds for such a delta): the sessions a change
        // woke at once wait for the first one's bytes instead of encoding the same message again.
        return try lastDelta.withLock { last in
            if let last, last.delta == delta { return last.payload }
            let payload = try encode()
            last = (delta, payload)
            return payload
        }
    }

    /// Up to this many entries are signed or verified on the connection's event loop (about
    /// 0.1 ms each); more go to the global executor.
    static let verifiedInPlace = 8

    /// `entries` with any unsigned ones signed (and their signatures kept in the replica),
    /// outside the one signer: only for a writer that keeps outrunning ``signPending()``
    /// (``SyncSession`` tries that first), as it may sign a write a second time.
    func signed(_ entries: [Entry]) throws -> [Entry] {
        guard entries.contains(where: { $0.signature == nil }) else { return entries }
        let result = try entries.map { $0.signature == nil ? try identity.signed($0, storeIdentifier: identifier) : $0 }
        // The ones signed here, by position (a search by key was quadratic in a big batch).
        let signedHere = zip(entries, result).compactMap { $0.0.signature == nil ? $0.1 : nil }
        replica.attachSignatures(signedHere)
        metrics.signedEntries(signedHere.count)
        return result
    }

    /// The DER certificates of the devices that signed `entries`, but ours (the peer has it
    /// from the TLS handshake) and those in `excluding` (sent for this store on this connection before).
    func certificates(for entries: [Entry], excluding sent: Set<Data>) -> [Data] {
        let signers = Set(entries.compactMap { $0.signature?.signer })
        return signers.compactMap { signer -> Data? in
            guard signer != identity.deviceID.data, let device = DeviceID(bytes: signer),
                  let certificate = certificates.certificate(for: device) else { return nil }
            let der = Data(certificate.derEncoded)
            return sent.contains(der) ? nil : der
        }
    }

    /// Admits the TLS peer's certificate and saves it with the replica, so its entries can be
    /// vouched for when it is away.
    func keep(peerCertificate certificate: Certificate, of device: DeviceID) {
        if (try? certificates.admit(certificate)) != nil {
            replica.keepCertificate(Data(certificate.derEncoded), signer: device.data)
        }
    }

    /// Does to the replica what a session's state decided about `peer` (``SessionReplicaEffect``),
    /// outside the session's lock.
    func perform(_ effects: [SessionReplicaEffect], for peer: TLSPeer) {
        for effect in effects {
            switch effect {
            case .keepPeerCertificate: keep(peerCertificate: peer.certificate, of: peer.deviceID)
            case .learnOfDevices(let devices): replica.learnOfDevices(devices)
            case .notePeer(let vector): replica.notePeer(peer.deviceID, acknowledged: vector)
            case .initialSyncCompleted: replica.initialSyncCompleted()
            case .wantWhole: replica.wantWhole()
            }
        }
    }

    /// What a received delta comes to once checked.
    struct Checked {
        /// Verified entries that would change the replica: to apply.
        var accepted: [Entry] = []
        /// Entries not applied, each with why: the sender is told.
        var refused: [RefusedEntry] = []
        /// The refused entries that may be acceptable later (stamped too far ahead of our
        /// clock): the vector is kept below them, so they come again.
        var heldBack: [Entry] = []
    }

    /// Checks a delta entry by entry; nothing is applied here. The certificates it carries
    /// are admitted (one that fails is logged, and the entries it would vouch for fail as
    /// unknown signers). Entries that lose to what the replica holds change nothing and are
    /// dropped unchecked (in a mesh most relayed entries are such duplicates); every other
    /// entry is verified (in parallel when there are many) for this store, and one stamped
    /// beyond the drift bound is held back. An entry that fails is refused alone.
    func check(_ delta: SyncMessage.Delta) async -> Checked {
        for der in delta.certificates {
            do {
                let certificate = try Certificate(derEncoded: der)
                let signer = try certificates.admit(certificate)
                engine?.devices?.note(certificate, seen: false)
                // Saved with the entries: we may have to vouch for them when their signer is away.
                replica.keepCertificate(der, signer: signer.data)
            } catch {
                logger.warning("a delta carried a device certificate that the account CA does not vouch for; the entries it signed are refused: \(error)")
            }
        }
        var checked = Checked(refused: delta.undecodable)
        // Each distinct entry is checked once: a delta that names one entry thousands of
        // times (shared objects cost the sender nothing) costs one verification.
        struct Identity: Hashable { let key: StoreKey, origin: ReplicaID, sequence: UInt64 }
        var seen = Set<Identity>()
        let distinct = delta.entries.filter { seen.insert(Identity(key: $0.key, origin: $0.origin, sequence: $0.sequence)).inserted }
        var winners: [Entry] = []
        for entry in replica.winningEntries(distinct) {
            // Only its own device may write under an origin (see ReplicaID.isBound(to:)).
            if let signer = entry.signature?.signer, !entry.origin.isBound(to: signer) {
                checked.refused.append(RefusedEntry(entry, reason: .originMismatch, detail: "origin \(entry.origin) is not one of device \(Hex.encode(signer.prefix(4)))'s"))
            } else {
                winners.append(entry)
            }
        }
        let failures = await verify(winners)
        let wall = replica.wallMilliseconds()
        for (entry, failure) in zip(winners, failures) {
            if let failure {
                checked.refused.append(failure)
            } else if !HybridLogicalClock.isAcceptable(entry.timestamp, wall: wall) {
                checked.refused.append(RefusedEntry(entry, reason: .clockAhead, detail:
                    "stamped \(entry.timestamp.date), more than \(HybridLogicalClock.maximumDrift / 3_600_000) h ahead of the receiver's clock (\(Date(timeIntervalSince1970: Double(wall) / 1000)))"))
                checked.heldBack.append(entry)
            } else {
                checked.accepted.append(entry)
            }
        }
        return checked
    }

    /// Verifies each entry's signature for this store; `nil` where it verifies.
    private func verify(_ entries: [Entry]) async -> [RefusedEntry?] {
        let store = identifier
        let certificates = self.certificates
        @Sendable func failure(_ entry: Entry) -> RefusedEntry? {
            do {
                try certificates.verify(entry: entry, storeIdentifier: store)
                return nil
            } catch let error as IdentityError where error.code == .unknownSigner {
                return RefusedEntry(entry, reason: .unknownSigner, detail: error.description)
            } catch let error as IdentityError where error.code == .removedSigner {
                return RefusedEntry(entry, reason: .removedSigner, detail: error.description)
            } catch {
                return RefusedEntry(entry, reason: .badSignature, detail: "\(error)")
            }
        }
        // A change or two is verified where the delta arrived (the connection's event loop).
        guard entries.count >= Self.verifiedInPlace else { return entries.map(failure) }
        // More would hold up the loop's other connections: on the global executor, and a full
        // initial sync's thousand signatures spread over the cores.
        let lanes = entries.count >= 64 ? max(1, ProcessInfo.processInfo.activeProcessorCount) : 1
        return await withTaskGroup(of: [(Int, RefusedEntry)].self) { group in
            for lane in 0..<lanes {
                group.addTask(executorPreference: globalConcurrentExecutor) {
                    stride(from: lane, to: entries.count, by: lanes).compactMap { index in failure(entries[index]).map { (index, $0) } }
                }
            }
            var results = [RefusedEntry?](repeating: nil, count: entries.count)
            for await lane in group { for (index, refused) in lane { results[index] = refused } }
            return results
        }
    }
}
