import Foundation
import HearthCore
import HearthIdentity

/// The sync protocol of one connection as a value (docs/protocol.md): what the peer is known
/// to have of each shared store, what is owed to it (the ``SessionMailbox``), and the flags of
/// the hello, renewal and removal exchanges. No I/O, no locks, no clock of its own: a method
/// takes a message (or the time) and what it needs of the replicas, changes the state, and
/// returns what the caller must do to them (``ReplicaEffect``) and to the other sessions
/// (``RelayEffect``); what to send is left in the mailbox, which ``next()`` empties in protocol
/// order. The link's liveness is its ``SessionHeartbeat``.
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
    /// Whether the peer's hello said it understands `links`: older builds are sent none.
    package private(set) var peerTakesLinks = false
    /// The devices the peer has a session with now, besides us (its last `links`). What they
    /// wrote, they push to it themselves: we do not relay it (docs/protocol.md, "Relays").
    package private(set) var peerLinks = Set<DeviceID>()
    /// The devices our last `links` named (none before the first).
    package private(set) var linksTold: [Data] = []
    package var renewal = Renewal()
    /// Entries of this connection refused for a bad or unknown signature.
    package private(set) var forgedEntries = 0
    /// Set when the peer was removed: the writer closes once it has sent the removals.
    package private(set) var expelled = false
    package var closed = false
    /// Set once the link has ended and the session left the engine: the writer sends nothing
    /// more (what it still had would go nowhere, and be counted as sent).
    package var linkEnded = false

    /// How many counters of origins we do not know yet are kept per store from a peer's claims:
    /// an honest peer's are the few writers whose entries are on their way to us; a lying peer
    /// fills only its own slots.
    package static var maximumUnknownClaims: Int { 64 }

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
        peerTakesLinks = hello.links
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
        if same {
            // The peer has exactly what we have: nothing to tell, nothing to send (and no first
            // download to make whole: relay direct first at once).
            entry.ready = true
            entry.relaying = true
            entry.peerKnown = view.vector
            entry.acknowledged = view.vector
            entry.told = view.vector
            // Known from now on: tombstones it lacks are kept until it has them. Known with
            // nothing saved: a hello says what the peer has, not what it keeps through a crash
            // (its first ping says that).
            effects.append(.notePeer(acknowledged: VersionVector()))
            // The peer has nothing we lack: the first download is done, and empty.
            if view.awaitingInitialSync { effects.append(.initialSyncCompleted) }
        }
        // Our hello carried our vector: the peer knows it, and only new peers are worth a message.
        let told = inOurHello && inlineInHello.contains(name)
        let tell = (!same && !told) || !samePeers
        entry.sentState = tell || told
        if !same, let vector = listed.vector {
            // The peer's hello carried its vector: as good as its `store` message.
            take(vector, of: name, into: &entry, view: view, effects: &effects)
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

    /// The peer has `vector` of `name` (its hello or its `store` message said so): the store is
    /// ready to send deltas, and what the peer has is noted.
    private mutating func take(_ vector: VersionVector, of name: String, into entry: inout Shared, view: ReplicaView,
                               effects: inout [ReplicaEffect]) {
        let claimed = vector.restricted(to: view.vector)
        entry.ready = true
        entry.peerKnown.formUnion(claimed)
        entry.acknowledged.formUnion(claimed)
        Self.keepUnknownClaims(vector, in: &entry.unknownClaims, ours: view.vector)
        // Known, with nothing saved: its hello or state says what it has, not what it keeps.
        effects.append(.notePeer(acknowledged: VersionVector()))
        // The peer has nothing we lack: the first download is done, and empty.
        if view.awaitingInitialSync, view.vector.dominates(vector) { effects.append(.initialSyncCompleted) }
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
        take(vector, of: name, into: &entry, view: view, effects: &effects)
        if state.whole && !entry.gaveWhole {
            // It dropped entries its vector still covers (a removed device's later writes): it
            // is sent everything, as a newcomer is, whatever it was sent before. Once per
            // connection: a peer asking again and again pays a connection per store it gets.
            entry.gaveWhole = true
            entry.peerKnown = VersionVector()
            entry.deferred = VersionVector()
            entry.relaying = false
        }
        shared[name] = entry
        if view.wantsWhole { askForWhole(name) }
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

    /// The peer has `vector` of `name` (restricted to origins we know): from its ack or delta
    /// (`known`: it has what we sent too) or its ping. False if the store is not synced here.
    @discardableResult
    package mutating func peerHas(_ vector: VersionVector, of name: String, known: Bool) -> Bool {
        guard shared[name] != nil else { return false }
        if known { shared[name]!.peerKnown.formUnion(vector) }
        shared[name]!.acknowledged.formUnion(vector)
        return true
    }

    /// The peer says it has `claimed` of `name`: its ack or a delta's vector (`known`: it has what
    /// we sent too), or its ping's or links' (only what it says). Counters of origins `ours` does
    /// not name are kept aside (bounded, ``claimsNowKnown(of:in:)``); the rest is noted (settling).
    /// `saved`: the peer has saved it (an ack's `durable`, a ping's, a pong's or links' vectors):
    /// then it is returned for the replica's tombstone collection. An ack's or a delta's vector
    /// says what the peer holds in memory: collected on that, a tombstone the peer then lost in a
    /// crash would never reach it again, and the value it removed would live on there
    /// (docs/simulator.md, finding 1). Nil if not saved, or `name` is not synced here.
    package mutating func acknowledge(_ claimed: VersionVector, of name: String, ours: VersionVector, known: Bool,
                                      saved: Bool) -> ReplicaEffect? {
        let vector = claimed.restricted(to: ours)
        keepUnknownClaims(claimed, of: name, ours: ours, saved: saved)
        return peerHas(vector, of: name, known: known) && saved ? .notePeer(acknowledged: vector) : nil
    }

    /// The peer's ack: it holds `ack.vector` (it has what we sent), and has saved `ack.saved`,
    /// which alone counts for tombstone collection (``acknowledge(_:of:ours:known:saved:)``).
    package mutating func acknowledged(_ ack: SyncMessage.Ack, ours: VersionVector) -> [ReplicaEffect] {
        var effects: [ReplicaEffect] = []
        if let held = acknowledge(ack.vector, of: ack.store, ours: ours, known: true, saved: ack.durable == nil) { effects.append(held) }
        if let durable = ack.durable, let saved = acknowledge(durable, of: ack.store, ours: ours, known: false, saved: true) {
            effects.append(saved)
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
        guard shares(name), peerLinks.contains(where: { writers.contains(ReplicaID.devicePrefix(of: $0.data)) }) else { return false }
        return scheduleVectorTell(of: name)
    }

    /// Stores whose vector we are to tell the peer soon (``scheduleVectorTell(of:)``).
    package private(set) var vectorTells = Set<String>()

    /// Notes that our vector of `name` is to be told soon; false if already scheduled.
    package mutating func scheduleVectorTell(of name: String) -> Bool { vectorTells.insert(name).inserted }

    /// The time to tell our vector of `name` has come: our state is posted (a `store` message
    /// with our vector), if the store is still shared.
    package mutating func vectorTellDue(of name: String) {
        guard vectorTells.remove(name) != nil, shares(name) else { return }
        mailbox.post(name) { $0.state = true }
    }

    /// Our links changed: the peer is told, if it understands them.
    package mutating func relayLinks() {
        if peerTakesLinks { mailbox.links = true }
    }

    /// Whether `devices`, our links now, are news to the peer (then they are noted as told).
    package mutating func linksToTell(_ devices: [Data]) -> Bool {
        guard devices != linksTold else { return false }
        linksTold = devices
        return true
    }

    /// The peer's links (a `links` message): the devices it has a session with now. What we
    /// deferred to a link that is gone is owed again, and every ready store is looked at.
    package mutating func peerLinked(_ devices: Set<DeviceID>) {
        let gone = peerLinks.subtracting(devices)
        peerLinks = devices
        guard !gone.isEmpty else { return }
        let prefixes = Set(gone.map { ReplicaID.devicePrefix(of: $0.data) })
        for name in shared.keys {
            shared[name]!.deferred = shared[name]!.deferred.filter { !prefixes.contains($0.devicePrefix) }
            if shared[name]!.ready { mailbox.post(name) { $0.delta = true } }
        }
    }

    /// `device` no longer syncs `name` with us (it left the store): what we deferred to it
    /// is owed again, since it may not have pushed its last writes to the peer.
    package mutating func forgetDeferred(_ device: DeviceID, of name: String) {
        guard let entry = shared[name] else { return }
        let prefix = ReplicaID.devicePrefix(of: device.data)
        let kept = entry.deferred.filter { $0.devicePrefix != prefix }
        guard kept != entry.deferred else { return }
        shared[name]!.deferred = kept
        if entry.ready { mailbox.post(name) { $0.delta = true } }
    }

    /// Keeps what the peer claimed of `name` for origins `ours` does not name yet (bounded);
    /// `saved`: it said it has saved it.
    package mutating func keepUnknownClaims(_ claimed: VersionVector, of name: String, ours: VersionVector, saved: Bool) {
        guard shared[name] != nil else { return }
        Self.keepUnknownClaims(claimed, in: &shared[name]!.unknownClaims, ours: ours)
        if saved { Self.keepUnknownClaims(claimed, in: &shared[name]!.unknownSavedClaims, ours: ours) }
    }

    private static func keepUnknownClaims(_ claimed: VersionVector, in kept: inout VersionVector, ours: VersionVector) {
        let unknown = claimed.counters.filter { ours.counters[$0.key] == nil }
        guard !unknown.isEmpty else { return }
        for (origin, counter) in unknown where kept.counters[origin] != nil || kept.counters.count < maximumUnknownClaims {
            kept.advance(origin: origin, to: counter)
        }
    }

    /// The kept claims of `name` about origins `ours` now names (taken out of the kept ones),
    /// now noted as acknowledged; returned, those the peer said it saved (for tombstone
    /// collection), nil if there are none.
    package mutating func claimsNowKnown(of name: String, in ours: VersionVector) -> VersionVector? {
        guard let kept = shared[name]?.unknownClaims, !kept.counters.isEmpty else { return nil }
        let known = kept.restricted(to: ours)
        guard !known.counters.isEmpty else { return nil }
        shared[name]!.unknownClaims = kept.filter { ours.counters[$0] == nil }
        shared[name]!.acknowledged.formUnion(known)
        let savedKept = shared[name]!.unknownSavedClaims
        let saved = savedKept.restricted(to: ours)
        guard !saved.counters.isEmpty else { return nil }
        shared[name]!.unknownSavedClaims = savedKept.filter { ours.counters[$0] == nil }
        return saved
    }

    /// A delta of `name` arrived: whether it belongs to the first batch (the initial download,
    /// which ends with a delta without `more`).
    package mutating func deltaArrived(for name: String, more: Bool) -> Bool {
        guard let first = shared[name]?.inFirstBatch else { return false }
        if !more { shared[name]!.inFirstBatch = false }
        return first
    }

    // MARK: A removed device's later writes

    /// Asks the peer for its whole store `name` (our next `store` message says `w`): this replica
    /// dropped a removed device's later writes, and the entries they replaced, which its vector
    /// covers, are the peer's to send again (docs/protocol.md, "Device removals").
    package mutating func askForWhole(_ name: String) {
        guard shared[name] != nil, !shared[name]!.askWhole, !shared[name]!.awaitingWhole else { return }
        shared[name]!.askWhole = true
        mailbox.post(name) { $0.state = true }
    }

    /// Our `store` message of `name` is being sent: whether it asks for the whole store.
    package mutating func takeWholeRequest(of name: String) -> Bool {
        guard shared[name]?.askWhole == true else { return false }
        shared[name]!.askWhole = false
        shared[name]!.awaitingWhole = true
        return true
    }

    /// A delta of `name` arrived: true once the whole store we asked for is in (its last delta).
    package mutating func wholeArrived(of name: String, more: Bool) -> Bool {
        guard shared[name]?.awaitingWhole == true, !more else { return false }
        shared[name]!.awaitingWhole = false
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

    /// The peer was told `vector` of `name` (our state or an ack).
    package mutating func told(_ vector: VersionVector, of name: String) { shared[name]?.told = vector }

    /// The peer was told that we saved `vector` of `name` (an ack's, a ping's, a pong's or links').
    package mutating func toldSaved(_ vector: VersionVector, of name: String) { shared[name]?.toldSaved = vector }

    /// What to compute a delta of `name` against: the store; what the peer is known to have,
    /// with what we deferred to its links; and the devices it is linked to, whose own writes
    /// we leave to them (none for the first delta, which is whole). Nil until the store is
    /// ready.
    package func deltaBasis(of name: String) -> (store: Store, peerKnown: VersionVector, linked: Set<DeviceID>)? {
        guard let entry = shared[name], entry.ready else { return nil }
        return (entry.store, entry.peerKnown.union(entry.deferred), entry.relaying ? peerLinks : [])
    }

    /// Of the certificates a delta part could carry, those the peer was not sent yet (now
    /// counted as sent).
    package mutating func certificatesToSend(_ candidates: [Data], of name: String) -> [Data] {
        let sent = shared[name]?.sentCertificates ?? []
        let fresh = candidates.filter { !sent.contains($0) }
        shared[name]?.sentCertificates.formUnion(fresh)
        return fresh
    }

    /// A delta of `name` up to `vector` was sent (or none was needed, `vector` then empty):
    /// the peer is known to have it; what is in `deferred` was left to the peer's links. From
    /// now on the store's deltas are relayed direct first.
    package mutating func deltaSent(_ vector: VersionVector, deferred: VersionVector = VersionVector(), of name: String) {
        guard shared[name] != nil else { return }
        shared[name]!.peerKnown.formUnion(vector)
        shared[name]!.deferred.formUnion(deferred)
        shared[name]!.relaying = true
    }

    /// The ready stores and the saved vector each was last told, for a ping.
    package var pingBasis: [String: (store: Store, told: VersionVector?)] {
        shared.filter { $0.value.ready }.mapValues { ($0.store, $0.toldSaved) }
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
