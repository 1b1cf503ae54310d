import Foundation
import HearthCore
import HearthIdentity

/// The sync protocol of one connection as a value (docs/protocol.md): what the peer is known
/// to have of each shared store, what is owed to it (the ``SessionMailbox``), and the flags of
/// the hello, renewal and removal exchanges. No I/O, no locks, no clock of its own: a method
/// takes a message (or the time) and what it needs of the replicas, changes the state, and
/// returns what the caller must do to them (``ReplicaEffect``) and to the other sessions
/// (``RelayEffect``); what to send is left in the mailbox, which ``next()`` empties in protocol
/// order. What it knows of each shared store, and the decisions that concern that store alone,
/// are the store's ``SharedStore``; the link's liveness is its ``SessionHeartbeat``.
///
/// ``SyncSession`` is its I/O shell: it keeps the state under one lock, reads replicas and
/// applies effects outside it, and its ``SessionWriter`` writes what ``next()`` gives.
/// `SessionStateTests` drive two states against each other with no sockets at all;
/// `RelayRoutingTests` the relay decisions.
///
/// `Store` is what the session syncs each store with: ``SyncStore`` in the engine, anything in
/// tests.
package struct SessionState<Store: Sendable>: Sendable {
    package typealias Shared = SharedStore<Store>
    package typealias Renewal = SessionRenewal
    package typealias ReplicaView = SessionReplicaView
    package typealias ReplicaEffect = SessionReplicaEffect

    // MARK: State

    /// The stores the peer said it serves (hello, `store` messages), at most
    /// ``SyncMessage/maximumStores``.
    package private(set) var served = Set<String>()
    package private(set) var shared: [String: Shared] = [:]
    /// The last state the peer sent of a store this device could not take up then (a daemon's
    /// provider finding it open in an app). The peer will not send it again: if the store is
    /// attached later, ``announce(_:named:)`` hands it back to be received.
    package private(set) var ignored: [String: SyncMessage.StoreState] = [:]
    package var mailbox = SessionMailbox()
    /// The stores our hello listed (set when it is sent): a store attached or detached around
    /// the hellos is told about with a `store` message instead.
    package private(set) var listedInHello: Set<String>?
    /// The stores whose vector our hello carried: the peer knows it, and needs no `store` message.
    package private(set) var inlineInHello = Set<String>()
    /// Whether the peer's hello carried a removals digest: older builds are sent no removals.
    package private(set) var peerKnowsRemovals = false
    /// The peer's links and ours as this connection knows them (``PeerLinks``).
    package private(set) var links = PeerLinks()
    /// The devices the peer has a session with now, besides us (``PeerLinks/devices``).
    package var peerLinks: Set<DeviceID> { links.devices }
    package var renewal = Renewal()
    /// Entries of this connection refused for a bad or unknown signature.
    package private(set) var forgedEntries = 0
    /// Set when the peer was removed: the writer closes once it has sent the removals.
    package private(set) var expelled = false
    package var closed = false
    /// Set once the link has ended and the session left the engine: the writer sends nothing
    /// more (what it still had would go nowhere, and be counted as sent).
    package var linkEnded = false

    /// See ``SharedStore/maximumUnknownClaims``.
    package static var maximumUnknownClaims: Int { Shared.maximumUnknownClaims }

    /// How many entries with a bad or unknown signature one connection may bring (a relay may
    /// pass on an entry whose signer's certificate it lacks, once).
    package static var maximumForgedEntries: Int { 64 }

    package init(now: ContinuousClock.Instant, dialled: Bool = false) {
        liveness = SessionHeartbeat(now: now, dialled: dialled)
    }

    /// Both ends serve `store` on this connection: ours is open here, and the peer listed it in
    /// its hello or sent its state since (a store we announced and it ignores is not shared).
    package func shares(_ store: String) -> Bool { shared[store] != nil && served.contains(store) }

    // MARK: The link and the hellos

    /// The stores this connection made the peer a known device of when its link came up (it was
    /// not one before): forgotten again there if its hello does not list them.
    package private(set) var knownSinceLinkUp = Set<String>()

    /// The peer's link is up, and it was made a known device of `stores` (``knownSinceLinkUp``).
    package mutating func linkUp(knownIn stores: Set<String>) { knownSinceLinkUp = stores }

    /// The peer's hello lists `listed`: of the stores it was made known in when its link came up,
    /// those it does not serve, where it is to be forgotten (it holds no entry of them to send).
    /// Given once.
    package mutating func notServedSinceLinkUp(listed: Set<String>) -> Set<String> {
        defer { knownSinceLinkUp = [] }
        return knownSinceLinkUp.subtracting(listed)
    }

    /// Our hello is being sent, listing these stores.
    package mutating func helloSent(listing stores: Set<String>, inline: Set<String> = []) {
        listedInHello = stores
        inlineInHello = inline
    }

    /// The peer's hello, verified: what it serves and understands. `removalsDigest` is ours
    /// (nil when we know of no removal): different digests, and ours are sent.
    package mutating func greet(_ hello: SyncMessage.Hello, removalsDigest: Data?) {
        liveness.greeted = true
        liveness.sparse = hello.links
        if let digest = hello.removalsDigest {
            peerKnowsRemovals = true
            if let removalsDigest, digest != removalsDigest { mailbox.removals = true }
        }
        renewal.peerRenews = hello.renews
        links.takesLinks = hello.links
        // Our links go right after the hello: the peer relays direct first from the start.
        if hello.links { mailbox.links = true }
        served = Set(hello.stores.map(\.identifier))
    }

    /// Starts syncing `name` as the peer's hello listed it; `ours` is what our hello would say
    /// of it now, `view` the replica it was computed from.
    package mutating func open(_ store: Store, named name: String, listed: SyncMessage.Hello.Store,
                               ours: SyncMessage.Hello.Store, view: ReplicaView) -> [ReplicaEffect] {
        guard shared[name] == nil else { return [] }
        // Equal digests mean something only if the peer had ours: our hello listed the store.
        let inOurHello = listedInHello?.contains(name) ?? false
        let same = inOurHello && listed.vectorDigest == ours.vectorDigest
        let samePeers = inOurHello && listed.peersDigest == ours.peersDigest
        var entry = Shared(store: store)
        var effects: [ReplicaEffect] = [.keepPeerCertificate]
        if same { entry.same(view, effects: &effects) }
        // Our hello carried our vector: the peer knows it, and only new peers are worth a message.
        let told = inOurHello && inlineInHello.contains(name)
        let tell = (!same && !told) || !samePeers
        entry.sentState = tell || told
        if !same, let vector = listed.vector {
            // The peer's hello carried its vector: as good as its `store` message.
            entry.take(vector, view: view, effects: &effects)
            mailbox.post(name) { $0.delta = true }
        }
        shared[name] = entry
        if tell {
            mailbox.post(name) { mail in
                mail.state = true
                mail.peers = !samePeers
            }
        }
        if view.wantsWhole { askForWhole(name) }
        return effects
    }

    /// The stores listed in our hello but no longer attached (`isAttached` says): the peer
    /// must not wait for us to sync them.
    package mutating func leaveDetached(isAttached: (String) -> Bool) {
        for name in listedInHello ?? [] where !isAttached(name) {
            mailbox.stores[name] = SessionMailbox.StoreMail(left: true)
        }
    }

    // MARK: Stores coming and going

    /// Starts syncing `name`, attached on this device since the hellos: our state is posted;
    /// deltas wait for the peer's answer. Returns nil if it was already synced here, else the
    /// state the peer sent before we had the store (to be received now), if any.
    package mutating func announce(_ store: Store, named name: String, wantsWhole: Bool = false) -> SyncMessage.StoreState?? {
        guard shared[name] == nil else { return nil }
        var entry = Shared(store: store)
        entry.sentState = true
        entry.askWhole = wantsWhole
        shared[name] = entry
        mailbox.post(name) { mail in
            mail.state = true
            mail.peers = true
        }
        return .some(ignored.removeValue(forKey: name))
    }

    /// Stops syncing `name` (detached on this device) and tells the peer.
    package mutating func leave(_ name: String) {
        guard shared.removeValue(forKey: name) != nil else { return }
        mailbox.stores[name] = SessionMailbox.StoreMail(left: true)
    }

    // MARK: Receiving

    /// The peer no longer serves `name`.
    package mutating func peerLeft(_ name: String) {
        served.remove(name)
        shared[name] = nil
        ignored[name] = nil
        mailbox.stores[name] = nil
    }

    /// Notes that the peer serves `name`; false (and ignored) past ``SyncMessage/maximumStores``.
    package mutating func peerServes(_ name: String) -> Bool {
        guard served.contains(name) || served.count < SyncMessage.maximumStores else { return false }
        served.insert(name)
        return true
    }

    /// Keeps the state of a store this device does not serve (yet), for ``announce(_:named:)``.
    /// Bounded: `served` holds at most maximumStores names, and these are among them.
    package mutating func ignore(_ state: SyncMessage.StoreState) {
        if state.vector != nil { ignored[state.store] = state }
    }

    /// The peer's state of a store this device serves (`store`): it is shared from now on; the
    /// peer's vector makes it ready, and we answer with our own state if not told yet, and
    /// with what the peer lacks.
    package mutating func receive(_ state: SyncMessage.StoreState, for store: Store, view: ReplicaView,
                                  ourDevice: DeviceID) -> [ReplicaEffect] {
        let name = state.store
        var effects: [ReplicaEffect] = []
        var entry = shared[name] ?? Shared(store: store)
        // Shared from now on, by the peer's word before ours (its state came before this device
        // announced the store): admit its certificate here, or its own entries would fail as
        // unknown signers (seen under load in DeviceEngineTests).
        if shared[name] == nil { effects.append(.keepPeerCertificate) }
        let answer = state.vector != nil && !entry.sentState
        if answer { entry.sentState = true }
        // The wire's 32-byte IDs become device IDs here, once (malformed ones are dropped).
        if let peers = state.peers {
            effects.append(.learnOfDevices(peers.compactMap { DeviceID(bytes: $0) }.filter { $0 != ourDevice }))
        }
        guard let vector = state.vector else {
            shared[name] = entry
            return effects
        }
        entry.take(vector, view: view, effects: &effects)
        // Asked for our whole store (the peer dropped a removed device's later writes): the first
        // time on this connection, the peer's is asked for too, and its entries of keys we lack get
        // in until it has come (``SyncReplica/wantWhole()``): what it restored may be covered here.
        let reciprocate = state.whole && entry.giveWhole()
        shared[name] = entry
        if reciprocate { effects.append(.wantWhole) }
        if view.wantsWhole || reciprocate { askForWhole(name) }
        mailbox.post(name) { mail in
            mail.delta = true
            // Not told ours yet (our hello's digest matched theirs, or we had not heard of it): answer.
            if answer {
                mail.state = true
                mail.peers = mail.peers || state.peers != nil
            }
        }
        return effects
    }

    /// A delta of `name` from the peer was checked and applied: `carried` entries (undecodable
    /// ones included), `accepted` of them verified, `changed` whether any key changed, `refused`
    /// what was not applied, `applied` our vector after it. The peer is told the refusals and,
    /// if the delta carried anything, our vector; returned is what the other sessions are to do
    /// (``Routing/targets(of:from:)``): relay what changed, note claims about origins now known,
    /// and tell peers linked to the writers our vector.
    /// `senderHas`, the delta's vector: when it covers `applied`, the peer lacks nothing of ours
    /// and only the other sessions are pushed.
    package mutating func deltaApplied(_ name: String, carried: Int, accepted: [Entry], changed: Bool, refused: [RefusedEntry],
                                       clock: @autoclosure () -> UInt64, applied: VersionVector,
                                       senderHas: VersionVector? = nil) -> [RelayEffect] {
        // An empty delta teaches the peer nothing new about us: its hello already did.
        self.applied(name, refused: refused, clock: refused.isEmpty ? 0 : clock(), ack: carried == 0 ? nil : applied)
        var effects: [RelayEffect] = []
        if changed { effects.append(senderHas?.dominates(applied) == true ? .pushOthers(name) : .push(name)) }
        if !accepted.isEmpty {
            effects.append(.originsLearned(name))
            effects.append(.tellLinkedPeers(name, writers: Set(accepted.map(\.origin.devicePrefix))))
        }
        return effects
    }

    /// Whether to tell the peer our vector of `name` soon, after entries of `writers` (device
    /// prefixes) arrived from another peer: if it is linked to one of them (it left their writes
    /// to them, so no ack of ours says we have them), once however many arrive meanwhile
    /// (``vectorTellDue(of:)``).
    package mutating func tellVectorSoon(of name: String, ifLinkedTo writers: Set<UInt64>) -> Bool {
        guard shares(name), links.linked(toAnyOf: writers) else { return false }
        return scheduleVectorTell(of: name)
    }

    /// Notes that our vector of `name` is to be told soon; false if already scheduled.
    package mutating func scheduleVectorTell(of name: String) -> Bool { links.scheduleVectorTell(of: name) }

    /// The time to tell our vector of `name` has come: our state is posted (a `store` message
    /// with our vector), if the store is still shared.
    package mutating func vectorTellDue(of name: String) {
        guard links.vectorTellDue(of: name), shares(name) else { return }
        mailbox.post(name) { $0.state = true }
    }

    /// Our links changed: the peer is told, if it understands them.
    package mutating func relayLinks() {
        if links.takesLinks { mailbox.links = true }
    }

    /// Whether `devices`, our links now, are news to the peer (then they are noted as told).
    package mutating func linksToTell(_ devices: [Data]) -> Bool { links.toTell(devices) }

    /// The peer's links (a `links` message): the devices it has a session with now. What we
    /// deferred to a link that is gone is owed again, and every ready store is looked at.
    package mutating func peerLinked(_ devices: Set<DeviceID>) {
        let prefixes = links.update(devices)
        guard !prefixes.isEmpty else { return }
        for name in shared.keys {
            _ = shared[name]!.forgetDeferred(of: prefixes)
            if shared[name]!.ready { mailbox.post(name) { $0.delta = true } }
        }
    }

    /// `device` no longer syncs `name` with us (it left the store): what we deferred to it
    /// is owed again, since it may not have pushed its last writes to the peer.
    package mutating func forgetDeferred(_ device: DeviceID, of name: String) {
        guard shared[name]?.forgetDeferred(of: [ReplicaID.devicePrefix(of: device.data)]) == true else { return }
        if shared[name]!.ready { mailbox.post(name) { $0.delta = true } }
    }

    // MARK: A removed device's later writes

    /// Asks the peer for its whole store `name` (our next `store` message says `w`), and sends it
    /// ours whole: this replica dropped entries its vector covers (a removed device's later
    /// writes, entries a re-stamp had beaten, entries it held back), which are the peer's to send
    /// again; what this replica restored in their place (``Replica/displaced``) the peer's vector
    /// may cover while it holds an older value (docs/protocol.md, "Device removals" and "A clock
    /// set right again"). Returns whether it was asked now (not already).
    @discardableResult
    package mutating func askForWhole(_ name: String) -> Bool {
        guard shared[name] != nil, !shared[name]!.askWhole, !shared[name]!.awaitingWhole else { return false }
        shared[name]!.askWhole = true
        shared[name]!.giveWholeWithRequest()
        mailbox.post(name) { mail in
            mail.state = true
            mail.delta = true
        }
        return true
    }

    /// Counts entries refused for their signature; true once the connection brought more than
    /// ``maximumForgedEntries`` (it is then closed: a forger pays a handshake per few entries).
    package mutating func noteForged(_ count: Int) -> Bool {
        forgedEntries += count
        return count > 0 && forgedEntries > Self.maximumForgedEntries
    }

    /// After applying a delta of `name`: the peer is told which entries were refused (bounded
    /// like the message that carries them) and, if the delta carried any, our vector (`applied`).
    package mutating func applied(_ name: String, refused: [RefusedEntry], clock: UInt64, ack applied: VersionVector?) {
        if !refused.isEmpty {
            mailbox.post(name) { mail in
                mail.refused = Array((mail.refused + refused).prefix(SyncMessage.maximumRefusals))
                mail.refusedClock = clock
            }
        }
        if let applied { mailbox.post(name) { $0.ack = applied } }
    }

    // MARK: Sending

    /// The next thing to send (see ``SessionMailbox/next()``).
    package mutating func next() -> SessionOutgoing? { mailbox.next() }

    /// The ready stores and the saved vector each was last told, for a ping.
    package var pingBasis: [String: (store: Store, told: VersionVector?)] {
        shared.filter { $0.value.ready }.mapValues { ($0.store, $0.toldSaved) }
    }

    // MARK: Per store (``SharedStore``)

    // Each finds the store `name` among those shared here and asks it (documented there). For a
    // store not shared here, nothing is done, and the answer is false, nil or empty.

    /// False if the store is not synced here.
    @discardableResult
    package mutating func peerHas(_ vector: VersionVector, of name: String, known: Bool) -> Bool {
        guard shared[name] != nil else { return false }
        shared[name]!.peerHas(vector, known: known)
        return true
    }
    package mutating func acknowledge(_ claimed: VersionVector, of name: String, ours: VersionVector, known: Bool,
                                      saved: Bool) -> ReplicaEffect? {
        shared[name]?.acknowledge(claimed, ours: ours, known: known, saved: saved)
    }
    package mutating func acknowledged(_ ack: SyncMessage.Ack, ours: VersionVector) -> [ReplicaEffect] {
        shared[ack.store]?.acknowledged(ack, ours: ours) ?? []
    }
    package mutating func keepUnknownClaims(_ claimed: VersionVector, of name: String, ours: VersionVector, saved: Bool) {
        shared[name]?.keepUnknownClaims(claimed, ours: ours, saved: saved)
    }
    package mutating func claimsNowKnown(of name: String, in ours: VersionVector) -> VersionVector? {
        shared[name]?.claimsNowKnown(in: ours)
    }
    package mutating func deltaArrived(for name: String, more: Bool) -> Bool { shared[name]?.deltaArrived(more: more) ?? false }
    package mutating func takeWholeRequest(of name: String) -> Bool { shared[name]?.takeWholeRequest() ?? false }
    package mutating func wholeArrived(of name: String, more: Bool) -> Bool { shared[name]?.wholeArrived(more: more) ?? false }
    /// The peer was told `vector` of `name` (our state or an ack).
    package mutating func told(_ vector: VersionVector, of name: String) { shared[name]?.told = vector }
    /// The peer was told that we saved `vector` of `name` (an ack's, a ping's, a pong's or links').
    package mutating func toldSaved(_ vector: VersionVector, of name: String) { shared[name]?.toldSaved = vector }
    package func deltaBasis(of name: String) -> (store: Store, peerKnown: VersionVector, linked: Set<DeviceID>)? {
        shared[name]?.deltaBasis(peerLinks: peerLinks)
    }
    /// ``deltaBasis(of:)`` for a delta planned with `sharers`, the devices that sync `name` with
    /// us now (``DeltaPlan``): first, what was deferred to a writer no longer among them is owed
    /// again (``SharedStore/keepDeferred(of:)``).
    package mutating func deltaBasis(of name: String, sharers: Set<DeviceID>) -> (store: Store, peerKnown: VersionVector, linked: Set<DeviceID>)? {
        shared[name]?.keepDeferred(of: Set(sharers.map { ReplicaID.devicePrefix(of: $0.data) }))
        return deltaBasis(of: name)
    }
    /// All of them if the store is not shared here.
    package mutating func certificatesToSend(_ candidates: [Data], of name: String) -> [Data] {
        shared[name]?.certificatesToSend(candidates) ?? candidates
    }
    package mutating func deltaSent(_ vector: VersionVector, deferred: VersionVector = VersionVector(), of name: String) {
        shared[name]?.deltaSent(vector, deferred: deferred)
    }

    // MARK: Removals and renewals

    /// Posts every removal we know, if the peer understands them.
    package mutating func relayRemovals() {
        if peerKnowsRemovals { mailbox.removals = true }
    }

    /// The peer was removed: posts the removals that tell it why; false if it cannot be told
    /// (an older build), and the connection is to close at once.
    package mutating func expel() -> Bool {
        guard peerKnowsRemovals else { return false }
        expelled = true
        mailbox.removals = true
        return true
    }

    /// Asks the peer for a renewed certificate (ours is due), once per connection, if the peer
    /// understands renewals.
    package mutating func askForRenewal() {
        guard renewal.peerRenews, !renewal.asked else { return }
        renewal.asked = true
        mailbox.renew = true
    }

    // MARK: Heartbeat (``SessionHeartbeat``)

    /// When frames went and came, the pacing of the peer's pings and removals, when to ping.
    package private(set) var liveness: SessionHeartbeat
    package typealias Beat = SessionHeartbeat.Beat
    /// Set once the peer's hello is verified; before that no ping may be sent.
    package var greeted: Bool { liveness.greeted }
    package var sparse: Bool { liveness.sparse }
    package var pings: Bool { liveness.pings }
    package var heartbeats: Pacer { liveness.heartbeats }
    package var removalMessages: Pacer { liveness.removalMessages }
    package static var heartbeatBurst: Int { SessionHeartbeat.heartbeatBurst }
    package static var heartbeatSpacing: Duration { SessionHeartbeat.heartbeatSpacing }
    package static var removalsBurst: Int { SessionHeartbeat.removalsBurst }
    package mutating func heartbeatArrived(at now: ContinuousClock.Instant) -> Duration { liveness.heartbeatArrived(at: now) }
    package mutating func removalsArrived(at now: ContinuousClock.Instant) -> Duration { liveness.removalsArrived(at: now) }
    package mutating func sent(at now: ContinuousClock.Instant) { liveness.sent(at: now) }
    package mutating func heard(at now: ContinuousClock.Instant) { liveness.heard(at: now) }
    package mutating func active(at now: ContinuousClock.Instant) { liveness.active(at: now) }
    package func pingInterval(now: ContinuousClock.Instant, interval: Duration) -> Duration { liveness.pingInterval(now: now, interval: interval) }
    package func allowedSilence(now: ContinuousClock.Instant, timeout: Duration, interval: Duration) -> Duration {
        liveness.allowedSilence(now: now, timeout: timeout, interval: interval)
    }
    package func heartbeatDelay(now: ContinuousClock.Instant, timeout: Duration, interval: Duration) -> Duration {
        liveness.heartbeatDelay(now: now, timeout: timeout, interval: interval)
    }

    /// A heartbeat tick (``SessionHeartbeat/heartbeat(now:timeout:interval:)``); a ping due is posted.
    package mutating func heartbeat(now: ContinuousClock.Instant, timeout: Duration, interval: Duration) -> Beat {
        let beat = liveness.heartbeat(now: now, timeout: timeout, interval: interval)
        if beat == .ping { mailbox.ping = true }
        return beat
    }
}
