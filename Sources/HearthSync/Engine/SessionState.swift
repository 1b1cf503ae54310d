import Foundation
import HearthCore
import HearthIdentity

/// The sync protocol of one connection as a value (docs/protocol.md): what the peer is known
/// to have of each shared store, what is owed to it (the ``SessionMailbox``), and the flags of
/// the hello, renewal and removal exchanges. No I/O, no locks, no clock of its own: a method
/// takes a message (or the time) and what it needs of the replicas, changes the state, and
/// returns what the caller must do to them (``ReplicaEffect``); what to send is left in the
/// mailbox, which ``next()`` empties in protocol order.
///
/// ``SyncSession`` is its I/O shell: it keeps the state under one lock, reads replicas and
/// applies effects outside it, and writes what ``next()`` gives. `SessionStateTests` drive two
/// states against each other with no sockets at all.
///
/// `Store` is what the session syncs each store with: ``SyncStore`` in the engine, anything in
/// tests.
package struct SessionState<Store: Sendable>: Sendable {
    /// A store both ends serve, as this connection sees it.
    package struct Shared: Sendable {
        package let store: Store
        /// Whether we know what the peer has of it (equal hello digests, or its `store`
        /// message): deltas wait until then.
        package var ready = false
        /// What the peer is known to have: its vector, what we sent, what it acknowledged.
        package var peerKnown = VersionVector()
        /// What the peer has confirmed having (its vector, acks and pings).
        package var acknowledged = VersionVector()
        /// The last vector of ours the peer was told (hello digest, state, ack or ping).
        package var told: VersionVector?
        /// Whether our `store` message has been sent (or posted) on this connection.
        package var sentState = false
        /// Certificates sent with this store's deltas: the peer keeps them, so each goes once.
        package var sentCertificates = Set<Data>()
        /// Whether the deltas received so far are the first batch (the initial download),
        /// which lasts until a delta without `more`.
        package var inFirstBatch = true
        /// Whether our first delta of the store on this connection was sent (or none was
        /// needed): from then on we relay direct first (``deltaBasis(of:)``). The first is
        /// whole, so that a newcomer's initial download from any one peer is complete.
        package var relaying = false
        /// What we did not relay because a device the peer is linked to wrote it, and so
        /// pushes it to the peer itself: taken as the peer's until the peer says that link
        /// is gone (``peerLinked(_:)``) or that device leaves the store (``forgetDeferred(_:of:)``).
        package var deferred = VersionVector()
        /// What the peer said it has of origins we did not know yet (at most
        /// ``maximumUnknownClaims``): noted once we know them (``claimsNowKnown(of:in:)``).
        /// Otherwise a peer that got an entry directly from its writer, and told us before we
        /// had it, would never be known to have it: nothing else would make it tell again.
        package var unknownClaims = VersionVector()

        package init(store: Store) { self.store = store }
    }

    /// Renewals on this connection: whether the peer understands them, whether we asked it for
    /// a certificate, whether it asked us (kept, so a CA unlocked later can still answer), and
    /// whether we issued it one (once per connection).
    package struct Renewal: Sendable, Equatable {
        package var peerRenews = false
        package var asked = false
        package var askedByPeer = false
        package var issued = false
    }

    /// What a decision needs to know of a store's replica (read outside the session's lock).
    package struct ReplicaView: Sendable {
        package var vector: VersionVector
        package var awaitingInitialSync: Bool

        package init(vector: VersionVector, awaitingInitialSync: Bool = false) {
            self.vector = vector
            self.awaitingInitialSync = awaitingInitialSync
        }
    }

    /// What the shell must do to a store's replica after a decision, in order.
    package enum ReplicaEffect: Sendable, Equatable {
        /// Admit the peer's certificate for the store's signature checks.
        case keepPeerCertificate
        /// The peer knows of these devices in the store (ours left out).
        case learnOfDevices([DeviceID])
        /// The peer has this much of the store (for settling and tombstone collection).
        case notePeer(acknowledged: VersionVector)
        /// The first download is done (the peer had nothing we lacked).
        case initialSyncCompleted
    }

    /// What a heartbeat tick found (``heartbeat(now:timeout:interval:)``).
    package enum Beat: Sendable, Equatable {
        /// Nothing to do.
        case alive
        /// We sent nothing for an interval: a ping was posted.
        case ping
        /// The peer said nothing for too long: end the session with this reason.
        case silent(String)
    }

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
    /// Set once the peer's hello is verified; before that no ping may be sent.
    package private(set) var greeted = false
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
    /// Paces the peer's pings and pongs (``heartbeatArrived(at:)``).
    package private(set) var heartbeats = Pacer(spacing: Self.heartbeatSpacing, burst: Self.heartbeatBurst)
    /// Paces the peer's `removals` messages (``removalsArrived(at:)``).
    package private(set) var removalMessages = Pacer(spacing: Self.removalsSpacing, burst: Self.removalsBurst)
    package var closed = false
    package private(set) var lastHeard: ContinuousClock.Instant
    package private(set) var lastSent: ContinuousClock.Instant
    /// When a frame other than a ping or pong last went out or came in: how long the link has
    /// been idle, which spaces its heartbeats out (``pingInterval(now:interval:)``).
    package private(set) var lastActivity: ContinuousClock.Instant
    /// Whether we dialled this connection: with a peer that takes sparse heartbeats, only the
    /// dialler pings (the other answers).
    package let dialled: Bool

    /// How many counters of origins we do not know yet are kept per store from a peer's claims:
    /// an honest peer's are the few writers whose entries are on their way to us; a lying peer
    /// fills only its own slots.
    package static var maximumUnknownClaims: Int { 64 }

    /// How many entries with a bad or unknown signature one connection may bring (a relay may
    /// pass on an entry whose signer's certificate it lacks, once).
    package static var maximumForgedEntries: Int { 64 }

    /// Pings and pongs a peer may send at once, then one per ``heartbeatSpacing`` (10 a second).
    /// An honest peer pings at most once per its heartbeat interval (30 s by default, 300 ms in
    /// the fastest tests) and pongs once per our ping: far below. One that floods them has its
    /// frames read at this pace: each costs a counter, and the answers ten small frames a second
    /// (and after a minute of that, its link is closed: ``Pacer/exhausted``).
    package static var heartbeatBurst: Int { 20 }
    package static var heartbeatSpacing: Duration { .milliseconds(100) }

    /// `removals` messages a peer may send at once, then one per ``removalsSpacing``. An honest
    /// peer sends one after the hellos when the digests differ and one per removal it learns
    /// (about one per device of the household when the owner removes one): far below.
    package static var removalsBurst: Int { 16 }
    package static var removalsSpacing: Duration { .seconds(1) }

    package init(now: ContinuousClock.Instant, dialled: Bool = false) {
        lastHeard = now
        lastSent = now
        lastActivity = now
        self.dialled = dialled
    }

    /// Both ends serve `store` on this connection: ours is open here, and the peer listed it in
    /// its hello or sent its state since (a store we announced and it ignores is not shared).
    package func shares(_ store: String) -> Bool { shared[store] != nil && served.contains(store) }

    // MARK: The hellos

    /// Our hello is being sent, listing these stores.
    package mutating func helloSent(listing stores: Set<String>, inline: Set<String> = []) {
        listedInHello = stores
        inlineInHello = inline
    }

    /// The peer's hello, verified: what it serves and understands. `removalsDigest` is ours
    /// (nil when we know of no removal): different digests, and ours are sent.
    package mutating func greet(_ hello: SyncMessage.Hello, removalsDigest: Data?) {
        greeted = true
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
            // Known from now on: tombstones it lacks are kept until it has them.
            effects.append(.notePeer(acknowledged: view.vector))
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
        effects.append(.notePeer(acknowledged: claimed))
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
    package mutating func announce(_ store: Store, named name: String) -> SyncMessage.StoreState?? {
        guard shared[name] == nil else { return nil }
        var entry = Shared(store: store)
        entry.sentState = true
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
        shared[name] = entry
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
    /// not name are kept aside (bounded, ``claimsNowKnown(of:in:)``); the rest is noted, and
    /// returned for the replica (settling, tombstone collection). Nil if `name` is not synced here.
    package mutating func acknowledge(_ claimed: VersionVector, of name: String, ours: VersionVector, known: Bool) -> ReplicaEffect? {
        let vector = claimed.restricted(to: ours)
        keepUnknownClaims(claimed, of: name, ours: ours)
        return peerHas(vector, of: name, known: known) ? .notePeer(acknowledged: vector) : nil
    }

    /// A delta of `name` from the peer was checked and applied: `carried` entries (undecodable
    /// ones included), `accepted` of them verified, `changed` whether any key changed, `refused`
    /// what was not applied, `applied` our vector after it. The peer is told the refusals and,
    /// if the delta carried anything, our vector; returned is what the other sessions are to do
    /// (``Routing/targets(of:from:)``): relay what changed, note claims about origins now known,
    /// and tell peers linked to the writers our vector.
    package mutating func deltaApplied(_ name: String, carried: Int, accepted: [Entry], changed: Bool, refused: [RefusedEntry],
                                       clock: @autoclosure () -> UInt64, applied: VersionVector) -> [RelayEffect] {
        // An empty delta teaches the peer nothing new about us: its hello already did.
        self.applied(name, refused: refused, clock: refused.isEmpty ? 0 : clock(), ack: carried == 0 ? nil : applied)
        var effects: [RelayEffect] = []
        if changed { effects.append(.push(name)) }
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

    /// Keeps what the peer claimed of `name` for origins `ours` does not name yet (bounded).
    package mutating func keepUnknownClaims(_ claimed: VersionVector, of name: String, ours: VersionVector) {
        guard shared[name] != nil else { return }
        Self.keepUnknownClaims(claimed, in: &shared[name]!.unknownClaims, ours: ours)
    }

    private static func keepUnknownClaims(_ claimed: VersionVector, in kept: inout VersionVector, ours: VersionVector) {
        let unknown = claimed.counters.filter { ours.counters[$0.key] == nil }
        guard !unknown.isEmpty else { return }
        for (origin, counter) in unknown where kept.counters[origin] != nil || kept.counters.count < maximumUnknownClaims {
            kept.advance(origin: origin, to: counter)
        }
    }

    /// The kept claims of `name` about origins `ours` now names (taken out of the kept ones),
    /// now noted as acknowledged; nil if there are none.
    package mutating func claimsNowKnown(of name: String, in ours: VersionVector) -> VersionVector? {
        guard let kept = shared[name]?.unknownClaims, !kept.counters.isEmpty else { return nil }
        let known = kept.restricted(to: ours)
        guard !known.counters.isEmpty else { return nil }
        shared[name]!.unknownClaims = kept.filter { ours.counters[$0] == nil }
        shared[name]!.acknowledged.formUnion(known)
        return known
    }

    /// A delta of `name` arrived: whether it belongs to the first batch (the initial download,
    /// which ends with a delta without `more`).
    package mutating func deltaArrived(for name: String, more: Bool) -> Bool {
        guard let first = shared[name]?.inFirstBatch else { return false }
        if !more { shared[name]!.inFirstBatch = false }
        return first
    }

    /// Counts entries refused for their signature; true once the connection brought more than
    /// ``maximumForgedEntries`` (it is then closed: a forger pays a handshake per few entries).
    package mutating func noteForged(_ count: Int) -> Bool {
        forgedEntries += count
        return count > 0 && forgedEntries > Self.maximumForgedEntries
    }

    /// A ping or pong arrived at `now`: how long the reader waits before handling it (zero
    /// unless the peer sends them faster than ``heartbeatSpacing`` after a burst).
    package mutating func heartbeatArrived(at now: ContinuousClock.Instant) -> Duration { heartbeats.arrived(at: now) }

    /// A `removals` message arrived at `now`: how long the reader waits before handling it.
    package mutating func removalsArrived(at now: ContinuousClock.Instant) -> Duration { removalMessages.arrived(at: now) }

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

    /// A frame went out at `now`.
    package mutating func sent(at now: ContinuousClock.Instant) { lastSent = now }

    /// A frame arrived at `now`.
    package mutating func heard(at now: ContinuousClock.Instant) { lastHeard = now }

    /// A frame other than a ping or pong went out or came in at `now`: the link is in use, and
    /// its heartbeat is back to the interval.
    package mutating func active(at now: ContinuousClock.Instant) { lastActivity = now }

    /// The peer was told `vector` of `name` (our state, an ack or a ping).
    package mutating func told(_ vector: VersionVector, of name: String) { shared[name]?.told = vector }

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

    /// The ready stores and the vector each was last told, for a ping.
    package var pingBasis: [String: (store: Store, told: VersionVector?)] {
        shared.filter { $0.value.ready }.mapValues { ($0.store, $0.told) }
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

    // MARK: Heartbeat

    /// How many heartbeat intervals apart pings may get on an idle link.
    package static var maximumIdleFactor: Int { 8 }

    /// Whether the heartbeat is sparse: the peer's hello said it takes `links`, which builds
    /// that space heartbeats out and answer pings with their vectors have said since.
    package var sparse: Bool { peerTakesLinks }

    /// How long the pinging side waits, having sent nothing, before it pings: the heartbeat
    /// interval while the link is in use; once idle, a quarter of the time it has been idle,
    /// up to ``maximumIdleFactor`` intervals (4 minutes by default). The kernel's TCP keepalive
    /// and user timeout still drop a link to a vanished machine within 90 s, without waking us.
    package func pingInterval(now: ContinuousClock.Instant, interval: Duration) -> Duration {
        guard sparse else { return interval }
        return min(interval * Self.maximumIdleFactor, max(interval, (now - lastActivity) / 4))
    }

    /// How long the peer may say nothing: the timeout, or two of its ping intervals once those
    /// are longer (an idle peer that went quiet at the start of the idle time is still noticed
    /// within the timeout: the allowance grows at half the speed of the silence).
    package func allowedSilence(now: ContinuousClock.Instant, timeout: Duration, interval: Duration) -> Duration {
        sparse ? max(timeout, pingInterval(now: now, interval: interval) * 2) : timeout
    }

    /// Whether we ping on this link: always with an older build; with a sparse one, only the
    /// side that dialled.
    package var pings: Bool { !sparse || dialled }

    /// How long until the next heartbeat tick: a few times per allowed silence, so that a dead
    /// link is noticed within it plus a third; before the hello, by its shorter timeout.
    package func heartbeatDelay(now: ContinuousClock.Instant, timeout: Duration, interval: Duration) -> Duration {
        let tick = tick(now: now, timeout: timeout, interval: interval)
        return greeted ? tick : min(tick, Self.helloTimeout(timeout))
    }

    /// A heartbeat tick at `now`: a peer silent for longer than allowed (or without a hello for
    /// its shorter timeout) is dead; a link on which the pinging side sent nothing for a ping
    /// interval gets a ping.
    package mutating func heartbeat(now: ContinuousClock.Instant, timeout: Duration, interval: Duration) -> Beat {
        let silence = now - lastHeard
        guard greeted else {
            let helloTimeout = Self.helloTimeout(timeout)
            return silence > helloTimeout ? .silent("no hello from the peer within \(helloTimeout)") : .alive
        }
        if silence > allowedSilence(now: now, timeout: timeout, interval: interval) {
            return .silent("no frame from the peer for \(silence); the link is dead")
        }
        guard pings else { return .alive }
        let tick = tick(now: now, timeout: timeout, interval: interval)
        guard now - lastSent >= pingInterval(now: now, interval: interval) - tick / 10 else { return .alive }
        mailbox.ping = true
        return .ping
    }

    private static func helloTimeout(_ timeout: Duration) -> Duration { min(timeout, .seconds(5)) }

    private func tick(now: ContinuousClock.Instant, timeout: Duration, interval: Duration) -> Duration {
        min(pingInterval(now: now, interval: interval), allowedSilence(now: now, timeout: timeout, interval: interval) / 3)
    }
}
