import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import Testing

/// The sync protocol of one connection as a value (`SessionState`), driven directly: no
/// sockets, no engine, no clock. A "replica" here is only a version vector, which is all the
/// protocol's decisions read of one; the session's I/O shell (`SyncSession`) is tested over
/// real connections by the other suites.
@Suite("Session state (the protocol as a value)")
struct SessionStateTests {
    typealias State = SessionState<String>

    static let a = ReplicaID(high: 1, low: 1)
    static let b = ReplicaID(high: 2, low: 2)
    static let peerDevice = Data(repeating: 7, count: 32)
    static let peer = DeviceID(bytes: peerDevice)!
    static let ourDevice = DeviceID(bytes: [UInt8](repeating: 9, count: 32))!

    static func vector(_ counters: [ReplicaID: UInt64]) -> VersionVector { VersionVector(counters) }

    static func hello(_ stores: [SyncMessage.Hello.Store], removalsDigest: Data? = nil, renews: Bool = true,
                      links: Bool = false) -> SyncMessage.Hello {
        SyncMessage.Hello(account: Data(count: 32), stores: stores, removalsDigest: removalsDigest, renews: renews, links: links)
    }

    static func listing(_ name: String, _ vector: VersionVector, peers: Data = Data([1])) -> SyncMessage.Hello.Store {
        SyncMessage.Hello.Store(identifier: name, vectorDigest: SyncMessage.vectorDigest(vector), peersDigest: peers)
    }

    /// Everything the state owes, in the order the writer would send it.
    static func drain(_ state: inout State) -> [SessionOutgoing] {
        var items: [SessionOutgoing] = []
        while let item = state.next() { items.append(item) }
        return items
    }

    @Test("Equal hello digests: the store is ready at once, the first download is done, and nothing is owed")
    func equalDigests() {
        let ours = Self.vector([Self.a: 5])
        var state = State(now: .now)
        state.helloSent(listing: ["notes"])
        state.greet(Self.hello([Self.listing("notes", ours)]), removalsDigest: nil)
        let effects = state.open("notes", named: "notes", listed: Self.listing("notes", ours), ours: Self.listing("notes", ours),
                                 view: .init(vector: ours, awaitingInitialSync: true))
        // Known, with nothing saved yet: a hello says what the peer holds, not what it keeps (finding 1).
        #expect(effects == [.keepPeerCertificate, .notePeer(acknowledged: VersionVector()), .initialSyncCompleted])
        #expect(state.shares("notes"))
        #expect(state.deltaBasis(of: "notes")?.peerKnown == ours)
        #expect(Self.drain(&state).isEmpty)
    }

    @Test("Equal digests mean nothing if our hello did not list the store: our state is owed")
    func equalDigestsUnlisted() {
        let ours = Self.vector([Self.a: 5])
        var state = State(now: .now)
        state.helloSent(listing: [])
        state.greet(Self.hello([Self.listing("notes", ours)]), removalsDigest: nil)
        let effects = state.open("notes", named: "notes", listed: Self.listing("notes", ours), ours: Self.listing("notes", ours),
                                 view: .init(vector: ours))
        #expect(effects == [.keepPeerCertificate])
        #expect(state.deltaBasis(of: "notes") == nil, "deltas wait for the peer's state")
        #expect(Self.drain(&state) == [.state("notes", peers: true)])
    }

    @Test("Different digests: our state goes first; the peer's state makes the store ready, and the delta follows")
    func differentDigests() throws {
        let ours = Self.vector([Self.a: 5])
        let theirs = Self.vector([Self.a: 3, Self.b: 4])
        var state = State(now: .now)
        state.helloSent(listing: ["notes"])
        state.greet(Self.hello([Self.listing("notes", theirs)]), removalsDigest: nil)
        _ = state.open("notes", named: "notes", listed: Self.listing("notes", theirs), ours: Self.listing("notes", ours),
                       view: .init(vector: ours))
        #expect(Self.drain(&state) == [.state("notes", peers: false)])
        #expect(state.deltaBasis(of: "notes") == nil)

        let effects = state.receive(SyncMessage.StoreState(store: "notes", vector: theirs, peers: [Self.peerDevice, Self.ourDevice.data]),
                                    for: "notes", view: .init(vector: ours), ourDevice: Self.ourDevice)
        // Origins we do not know (b) are not claimed; our own device is not learned of.
        let claimed = Self.vector([Self.a: 3])
        #expect(effects == [.learnOfDevices([Self.peer]), .notePeer(acknowledged: VersionVector())])
        #expect(try #require(state.deltaBasis(of: "notes")).peerKnown == claimed)
        // Our state was sent already: only the delta is owed.
        #expect(Self.drain(&state) == [.delta("notes")])
    }

    @Test("Vectors in both hellos: no state is owed, the store is ready at once, and the delta goes first")
    func inlineVectors() throws {
        let ours = Self.vector([Self.a: 5])
        let theirs = Self.vector([Self.a: 3, Self.b: 4])
        var state = State(now: .now)
        state.helloSent(listing: ["notes"], inline: ["notes"])
        var listed = Self.listing("notes", theirs, peers: Data([1]))
        listed.vector = theirs
        state.greet(Self.hello([listed]), removalsDigest: nil)
        let effects = state.open("notes", named: "notes", listed: listed, ours: Self.listing("notes", ours, peers: Data([1])),
                                 view: .init(vector: ours))
        let claimed = Self.vector([Self.a: 3])
        #expect(effects == [.keepPeerCertificate, .notePeer(acknowledged: VersionVector())])
        #expect(try #require(state.deltaBasis(of: "notes")).peerKnown == claimed)
        #expect(Self.drain(&state) == [.delta("notes")])
        // Its claim of an origin we do not know (b) was kept aside, and counts once b is known:
        // as acknowledged, not as saved (a hello says what the peer holds).
        #expect(state.claimsNowKnown(of: "notes", in: Self.vector([Self.a: 5, Self.b: 1])) == nil)
        #expect(state.shared["notes"]?.acknowledged == Self.vector([Self.a: 3, Self.b: 4]))
    }

    @Test("A vector in the peer's hello only: ours is still told, and the delta need not wait for it")
    func inlineVectorTheirsOnly() {
        let ours = Self.vector([Self.a: 5])
        var state = State(now: .now)
        state.helloSent(listing: ["notes"])
        var listed = Self.listing("notes", Self.vector([Self.a: 2]))
        listed.vector = Self.vector([Self.a: 2])
        state.greet(Self.hello([listed]), removalsDigest: nil)
        _ = state.open("notes", named: "notes", listed: listed, ours: Self.listing("notes", ours), view: .init(vector: ours))
        #expect(Self.drain(&state) == [.state("notes", peers: false), .delta("notes")])
    }

    @Test("A store our hello did not share: the peer's state is answered with ours, then a delta")
    func stateBeforeOurs() {
        var state = State(now: .now)
        state.greet(Self.hello([]), removalsDigest: nil)
        let serves = state.peerServes("photos")
        #expect(serves)
        let effects = state.receive(SyncMessage.StoreState(store: "photos", vector: Self.vector([Self.b: 1]), peers: [Self.peerDevice]),
                                    for: "photos", view: .init(vector: Self.vector([Self.b: 1]), awaitingInitialSync: true),
                                    ourDevice: Self.ourDevice)
        #expect(effects == [.keepPeerCertificate, .learnOfDevices([Self.peer]),
                            .notePeer(acknowledged: VersionVector()), .initialSyncCompleted])
        #expect(Self.drain(&state) == [.state("photos", peers: true), .delta("photos")])
    }

    @Test("Two sessions, each the other's peer, exchange states, deltas and acks until each has acknowledged the other")
    func twoSessionsSettle() throws {
        // Each side's replica is a vector; a delta carries the sender's vector, which the
        // receiver applies as a real replica would (it then has all of it).
        struct Side {
            var state = State(now: .now)
            var replica: VersionVector
        }
        var sides = [Side(replica: Self.vector([Self.a: 4])), Side(replica: Self.vector([Self.b: 2]))]
        // Both know both origins (a real replica learns an origin with its first entry).
        sides[0].replica.formUnion(Self.vector([Self.b: 0]))
        sides[1].replica.formUnion(Self.vector([Self.a: 0]))
        for i in 0..<2 {
            sides[i].state.helloSent(listing: ["notes"])
        }
        for i in 0..<2 {
            let other = sides[1 - i]
            sides[i].state.greet(Self.hello([Self.listing("notes", other.replica)]), removalsDigest: nil)
            _ = sides[i].state.open("notes", named: "notes", listed: Self.listing("notes", other.replica),
                                    ours: Self.listing("notes", sides[i].replica), view: .init(vector: sides[i].replica))
        }
        var rounds = 0
        var moved = true
        while moved {
            moved = false
            rounds += 1
            #expect(rounds < 20, "the exchange does not end")
            if rounds >= 20 { break }
            for i in 0..<2 {
                let j = 1 - i
                while let item = sides[i].state.next() {
                    moved = true
                    switch item {
                    case .state(let name, _):
                        sides[i].state.told(sides[i].replica, of: name)
                        let view = SessionState<String>.ReplicaView(vector: sides[j].replica)
                        _ = sides[j].state.receive(SyncMessage.StoreState(store: name, vector: sides[i].replica),
                                                   for: name, view: view, ourDevice: Self.ourDevice)
                    case .delta(let name):
                        let (_, known, _) = try #require(sides[i].state.deltaBasis(of: name))
                        guard !known.dominates(sides[i].replica) else { continue }
                        let sent = sides[i].replica
                        sides[i].state.deltaSent(sent, of: name)
                        // The receiver applies it, notes the sender's claim, and acks.
                        sides[j].replica.formUnion(sent)
                        _ = sides[j].state.deltaArrived(for: name, more: false)
                        sides[j].state.peerHas(sent.restricted(to: sides[j].replica), of: name, known: true)
                        sides[j].state.applied(name, refused: [], clock: 0, ack: sides[j].replica)
                    case .ack(let ack):
                        sides[i].state.told(ack.vector, of: ack.store)
                        sides[j].state.peerHas(ack.vector.restricted(to: sides[j].replica), of: ack.store, known: true)
                    default:
                        Issue.record("unexpected \(item)")
                    }
                }
            }
        }
        #expect(sides[0].replica == sides[1].replica)
        #expect(sides[0].replica == Self.vector([Self.a: 4, Self.b: 2]))
        for i in 0..<2 {
            #expect(sides[i].state.shared["notes"]?.acknowledged == sides[i].replica, "side \(i) is settled")
        }
    }

    @Test("The peer leaving a store ends it on this connection, with what was owed about it")
    func peerLeft() {
        var state = State(now: .now)
        state.greet(Self.hello([]), removalsDigest: nil)
        _ = state.peerServes("notes")
        _ = state.receive(SyncMessage.StoreState(store: "notes", vector: VersionVector()), for: "notes",
                          view: .init(vector: VersionVector()), ourDevice: Self.ourDevice)
        #expect(state.shares("notes"))
        state.peerLeft("notes")
        #expect(!state.shares("notes"))
        #expect(Self.drain(&state).isEmpty)
        let taken = state.peerHas(Self.vector([Self.a: 1]), of: "notes", known: true)
        #expect(!taken, "an ack of a left store is ignored")
    }

    @Test("A peer may serve at most maximumStores stores on one connection")
    func storeBound() {
        var state = State(now: .now)
        let first = (0..<SyncMessage.maximumStores).map { state.peerServes("store \($0)") }
        #expect(first.allSatisfy { $0 })
        let tooMany = state.peerServes("one too many")
        #expect(!tooMany)
        let again = state.peerServes("store 0")
        #expect(again, "a store already counted stays")
    }

    @Test("The state of a store not served yet is kept, and received once the store is announced")
    func ignoredThenAnnounced() throws {
        var state = State(now: .now)
        let early = SyncMessage.StoreState(store: "photos", vector: Self.vector([Self.b: 3]))
        state.ignore(early)
        let announced = state.announce("photos", named: "photos")
        let replay = try #require(announced)
        #expect(replay == early)
        let second = state.announce("photos", named: "photos")
        #expect(second == nil, "announced once")
        #expect(Self.drain(&state) == [.state("photos", peers: true)])
    }

    @Test("Detaching a store the peer shares tells it so; one never shared is not mentioned")
    func leave() {
        var state = State(now: .now)
        _ = state.peerServes("notes")
        _ = state.receive(SyncMessage.StoreState(store: "notes", vector: VersionVector()), for: "notes",
                          view: .init(vector: VersionVector()), ourDevice: Self.ourDevice)
        _ = Self.drain(&state)
        state.leave("notes")
        state.leave("never shared")
        #expect(Self.drain(&state) == [.left("notes")])
    }

    @Test("Heartbeat: no hello within 5 s is silence; once greeted, a ping after an interval of ours, silence after the timeout of theirs")
    func heartbeat() {
        let start = ContinuousClock.now
        let timeout = Duration.seconds(30), interval = Duration.seconds(10)
        var state = State(now: start)
        #expect(state.heartbeatDelay(now: start, timeout: timeout, interval: interval) == .seconds(5))
        let early = state.heartbeat(now: start + .seconds(4), timeout: timeout, interval: interval)
        #expect(early == .alive)
        guard case .silent = state.heartbeat(now: start + .seconds(6), timeout: timeout, interval: interval) else {
            Issue.record("no hello within 5 s must end the session")
            return
        }
        state.greet(Self.hello([]), removalsDigest: nil)
        state.heard(at: start + .seconds(6))
        state.sent(at: start + .seconds(6))
        #expect(state.heartbeatDelay(now: start, timeout: timeout, interval: interval) == .seconds(10))
        let recent = state.heartbeat(now: start + .seconds(10), timeout: timeout, interval: interval)
        #expect(recent == .alive)
        let idle = state.heartbeat(now: start + .seconds(16), timeout: timeout, interval: interval)
        #expect(idle == .ping)
        #expect(Self.drain(&state) == [.ping])
        state.sent(at: start + .seconds(16))
        let quiet = state.heartbeat(now: start + .seconds(20), timeout: timeout, interval: interval)
        #expect(quiet == .alive)
        guard case .silent = state.heartbeat(now: start + .seconds(37), timeout: timeout, interval: interval) else {
            Issue.record("31 s without a frame from the peer must end the session")
            return
        }
    }

    @Test("Sparse heartbeat: only the dialler pings, ever more rarely as the link stays idle; silence allowed grows half as fast")
    func sparseHeartbeat() {
        let start = ContinuousClock.now
        let timeout = Duration.seconds(30), interval = Duration.seconds(10)
        var dialler = State(now: start, dialled: true), answerer = State(now: start)
        for state in [0, 1] {
            if state == 0 { dialler.greet(Self.hello([], links: true), removalsDigest: nil) } else { answerer.greet(Self.hello([], links: true), removalsDigest: nil) }
        }
        _ = Self.drain(&dialler)
        _ = Self.drain(&answerer)
        // In use: the interval.
        #expect(dialler.pingInterval(now: start + .seconds(20), interval: interval) == .seconds(10))
        #expect(dialler.heartbeat(now: start + .seconds(11), timeout: timeout, interval: interval) == .ping)
        #expect(answerer.heartbeat(now: start + .seconds(11), timeout: timeout, interval: interval) == .alive, "the answerer does not ping")
        // Idle for 200 s: pings 50 s apart, silence allowed 100 s; capped at 8 intervals.
        #expect(dialler.pingInterval(now: start + .seconds(200), interval: interval) == .seconds(50))
        #expect(answerer.allowedSilence(now: start + .seconds(200), timeout: timeout, interval: interval) == .seconds(100))
        #expect(dialler.pingInterval(now: start + .seconds(3_600), interval: interval) == .seconds(80))
        #expect(dialler.heartbeatDelay(now: start + .seconds(3_600), timeout: timeout, interval: interval) == .seconds(160) / 3)
        // A peer that went quiet when the link went idle is still noticed soon after the timeout.
        answerer.heard(at: start)
        guard case .silent = answerer.heartbeat(now: start + .seconds(31), timeout: timeout, interval: interval) else {
            Issue.record("a peer silent for the whole idle time must be dropped after the timeout")
            return
        }
        // Activity brings the interval back.
        dialler.active(at: start + .seconds(3_600))
        #expect(dialler.pingInterval(now: start + .seconds(3_601), interval: interval) == .seconds(10))
        // An older build (no `links` in its hello): both ping, at the interval, as before.
        var old = State(now: start)
        old.greet(Self.hello([]), removalsDigest: nil)
        #expect(old.pings && !old.sparse)
        #expect(old.pingInterval(now: start + .seconds(3_600), interval: interval) == .seconds(10))
    }

    @Test("Forged entries: up to maximumForgedEntries are tolerated on a connection, the next closes it")
    func forged() {
        var state = State(now: .now)
        let none = state.noteForged(0)
        let atLimit = state.noteForged(State.maximumForgedEntries)
        let over = state.noteForged(1)
        #expect(!none && !atLimit)
        #expect(over)
    }

    @Test("Expelling a peer that knows removals sends them before anything else; one that does not is closed at once")
    func expel() {
        var old = State(now: .now)
        old.greet(Self.hello([], removalsDigest: nil), removalsDigest: Data([1]))
        let toldOld = old.expel()
        #expect(!toldOld)
        #expect(!old.expelled)

        var state = State(now: .now)
        state.greet(Self.hello([], removalsDigest: Data([2])), removalsDigest: nil)
        _ = state.peerServes("notes")
        _ = state.receive(SyncMessage.StoreState(store: "notes", vector: VersionVector()), for: "notes",
                          view: .init(vector: VersionVector()), ourDevice: Self.ourDevice)
        let told = state.expel()
        #expect(told)
        #expect(state.expelled)
        let first = state.next()
        #expect(first == .removals)
    }

    @Test("Different removals digests in the hellos: ours are owed; the same digest, none")
    func removalsDigest() {
        var differ = State(now: .now)
        differ.greet(Self.hello([], removalsDigest: Data([1])), removalsDigest: Data([2]))
        #expect(Self.drain(&differ) == [.removals])
        var same = State(now: .now)
        same.greet(Self.hello([], removalsDigest: Data([1])), removalsDigest: Data([1]))
        #expect(Self.drain(&same).isEmpty)
    }

    @Test("Renewal: asked once per connection, and only of a peer that understands it")
    func renewal() {
        var state = State(now: .now)
        state.greet(Self.hello([], renews: true), removalsDigest: nil)
        state.askForRenewal()
        state.askForRenewal()
        #expect(Self.drain(&state) == [.renew])
        var old = State(now: .now)
        old.greet(Self.hello([], renews: false), removalsDigest: nil)
        old.askForRenewal()
        #expect(Self.drain(&old).isEmpty)
    }

    @Test("Refused entries go before the ack of the same delta, bounded like the message")
    func refusedThenAck() throws {
        var state = State(now: .now)
        _ = state.peerServes("notes")
        _ = state.receive(SyncMessage.StoreState(store: "notes", vector: VersionVector()), for: "notes",
                          view: .init(vector: VersionVector()), ourDevice: Self.ourDevice)
        _ = Self.drain(&state)
        let refused = (0..<(SyncMessage.maximumRefusals + 10)).map {
            RefusedEntry(key: StoreKey("k\($0)"), origin: Self.b, sequence: UInt64($0), reason: .badSignature, detail: "test")
        }
        state.applied("notes", refused: refused, clock: 42, ack: Self.vector([Self.a: 1]))
        let items = Self.drain(&state)
        #expect(items.count == 2)
        guard case .refused(let refusal) = items.first, case .ack(let ack) = items.last else {
            Issue.record("expected a refusal, then an ack: \(items)")
            return
        }
        #expect(refusal.entries.count == SyncMessage.maximumRefusals)
        #expect(refusal.clock == 42)
        #expect(ack.vector == Self.vector([Self.a: 1]))
    }

    @Test("A certificate goes once per connection and store")
    func certificatesOnce() {
        var state = State(now: .now)
        _ = state.peerServes("notes")
        _ = state.receive(SyncMessage.StoreState(store: "notes", vector: VersionVector()), for: "notes",
                          view: .init(vector: VersionVector()), ourDevice: Self.ourDevice)
        let first = state.certificatesToSend([Data([1]), Data([2])], of: "notes")
        let second = state.certificatesToSend([Data([2]), Data([3])], of: "notes")
        #expect(first == [Data([1]), Data([2])])
        #expect(second == [Data([3])])
    }

    // MARK: Relays, direct first

    /// The device whose origins start like `a`'s (ReplicaID high 1): `a`'s writer.
    static let writerOfA = DeviceID(bytes: [0, 0, 0, 0, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 24))!

    /// A state whose store `notes` is ready: the peer (which takes links) sent `theirs`.
    static func ready(ours: VersionVector, theirs: VersionVector) -> State {
        var state = State(now: .now)
        state.helloSent(listing: ["notes"])
        state.greet(hello([listing("notes", theirs)], links: true), removalsDigest: nil)
        _ = state.open("notes", named: "notes", listed: listing("notes", theirs), ours: listing("notes", ours), view: .init(vector: ours))
        _ = state.receive(SyncMessage.StoreState(store: "notes", vector: theirs), for: "notes", view: .init(vector: ours), ourDevice: ourDevice)
        return state
    }

    @Test("Issue 28: a `store` message with `w` makes the next delta whole (nothing taken as sent, nothing left to links), at most 8 times per connection; asking sends `w` once, until the whole store's last delta")
    func wholeStore() throws {
        let ours = Self.vector([Self.a: 5, Self.b: 2])
        var state = Self.ready(ours: ours, theirs: ours)
        _ = Self.drain(&state)
        state.deltaSent(ours, of: "notes")
        state.peerLinked([Self.writerOfA])
        #expect(state.deltaBasis(of: "notes")?.peerKnown == ours)
        _ = state.receive(SyncMessage.StoreState(store: "notes", vector: ours, whole: true), for: "notes", view: .init(vector: ours),
                          ourDevice: Self.ourDevice)
        let basis = try #require(state.deltaBasis(of: "notes"))
        #expect(basis.peerKnown == VersionVector() && basis.linked.isEmpty, "everything, as to a newcomer")
        #expect(Self.drain(&state).contains(.delta("notes")))
        state.deltaSent(ours, of: "notes")
        // Asked again (a clock set right: docs/protocol.md), answered again, up to 8 times in all.
        for _ in 1..<SharedStore<String>.maximumWholes {
            _ = state.receive(SyncMessage.StoreState(store: "notes", vector: ours, whole: true), for: "notes",
                              view: .init(vector: ours), ourDevice: Self.ourDevice)
            #expect(state.deltaBasis(of: "notes")?.peerKnown == VersionVector())
            state.deltaSent(ours, of: "notes")
        }
        _ = state.receive(SyncMessage.StoreState(store: "notes", vector: VersionVector(), whole: true), for: "notes",
                          view: .init(vector: ours), ourDevice: Self.ourDevice)
        #expect(state.deltaBasis(of: "notes")?.peerKnown == ours, "a ninth request on the connection is an ordinary state")
        // The first request asked for the peer's whole store in turn (finding 10): answered here.
        let reciprocal = state.takeWholeRequest(of: "notes")
        #expect(reciprocal && state.wholeArrived(of: "notes", more: false))

        // Our side: one request, carried by our next state, until the whole store's last delta.
        state.askForWhole("notes")
        state.askForWhole("notes")
        #expect(Self.drain(&state).filter { $0 == .state("notes", peers: false) }.count == 1)
        let first = state.takeWholeRequest(of: "notes"), again = state.takeWholeRequest(of: "notes")
        #expect(first && !again)
        state.askForWhole("notes")
        let part = state.wholeArrived(of: "notes", more: true)
        let last = state.wholeArrived(of: "notes", more: false)
        let after = state.wholeArrived(of: "notes", more: false)
        #expect(!part && last && !after)
    }

    @Test("Issue 28, finding 10: a whole store is asked for both ways: asking gives ours whole; the first `w` on a connection asks for the peer's whole store and wants it (wantWhole), a second does not")
    func wholeStoreBothWays() throws {
        let ours = Self.vector([Self.a: 5, Self.b: 2])
        var asker = Self.ready(ours: ours, theirs: ours)
        _ = Self.drain(&asker)
        asker.deltaSent(ours, of: "notes")
        asker.askForWhole("notes")
        #expect(asker.deltaBasis(of: "notes")?.peerKnown == VersionVector(), "ours goes whole with the request")
        #expect(Self.drain(&asker).contains(.delta("notes")))

        var answerer = Self.ready(ours: ours, theirs: ours)
        _ = Self.drain(&answerer)
        answerer.deltaSent(ours, of: "notes")
        let effects = answerer.receive(SyncMessage.StoreState(store: "notes", vector: ours, whole: true), for: "notes",
                                       view: .init(vector: ours), ourDevice: Self.ourDevice)
        let asks = answerer.takeWholeRequest(of: "notes")
        #expect(effects.contains(.wantWhole))
        #expect(asks, "our next state asks for the peer's whole store")
        let again = answerer.receive(SyncMessage.StoreState(store: "notes", vector: ours, whole: true), for: "notes",
                                     view: .init(vector: ours), ourDevice: Self.ourDevice)
        let asksAgain = answerer.takeWholeRequest(of: "notes")
        #expect(!again.contains(.wantWhole) && !asksAgain, "once per connection")
    }

    @Test("Direct first: our links go right after the hello; the first delta is whole, later ones leave out the peer's linked writers")
    func directFirst() throws {
        let ours = Self.vector([Self.a: 5, Self.b: 2])
        var state = Self.ready(ours: ours, theirs: VersionVector())
        #expect(Self.drain(&state) == [.links, .state("notes", peers: false), .delta("notes")])
        state.peerLinked([Self.writerOfA])
        // The first delta is whole (a newcomer's download from any one peer is complete).
        #expect(try #require(state.deltaBasis(of: "notes")).linked.isEmpty)
        state.deltaSent(ours, of: "notes")
        // Then A's writer is left to push its own writes: what we leave out is remembered.
        #expect(try #require(state.deltaBasis(of: "notes")).linked == [Self.writerOfA])
        state.deltaSent(Self.vector([Self.b: 3]), deferred: Self.vector([Self.a: 9]), of: "notes")
        #expect(state.deltaBasis(of: "notes")?.peerKnown == Self.vector([Self.a: 9, Self.b: 3]))
        #expect(state.shared["notes"]?.acknowledged == VersionVector(), "left out is not acknowledged")
        #expect(Self.drain(&state).isEmpty)
    }

    @Test("Direct first: when the peer's link to a writer is gone, what was left to it is owed again")
    func linkGone() throws {
        let ours = Self.vector([Self.a: 5, Self.b: 2])
        var state = Self.ready(ours: ours, theirs: VersionVector())
        _ = Self.drain(&state)
        state.peerLinked([Self.writerOfA])
        state.deltaSent(Self.vector([Self.b: 2]), of: "notes")
        state.deltaSent(VersionVector(), deferred: Self.vector([Self.a: 9]), of: "notes")
        // A link added changes nothing owed.
        state.peerLinked([Self.writerOfA, Self.peer])
        #expect(Self.drain(&state).isEmpty)
        // The writer's link is gone: its writes are the peer's only as far as the peer said.
        state.peerLinked([Self.peer])
        #expect(state.deltaBasis(of: "notes")?.peerKnown == Self.vector([Self.b: 2]))
        #expect(state.deltaBasis(of: "notes")?.linked == [Self.peer])
        #expect(Self.drain(&state) == [.delta("notes")])
    }

    @Test("Direct first: a writer that leaves the store may not have pushed its last writes; they are owed again")
    func writerLeft() {
        var state = Self.ready(ours: Self.vector([Self.a: 5]), theirs: VersionVector())
        _ = Self.drain(&state)
        state.peerLinked([Self.writerOfA])
        state.deltaSent(VersionVector(), deferred: Self.vector([Self.a: 5]), of: "notes")
        state.forgetDeferred(Self.peer, of: "notes")   // another device: nothing changes
        #expect(Self.drain(&state).isEmpty)
        state.forgetDeferred(Self.writerOfA, of: "notes")
        #expect(state.deltaBasis(of: "notes")?.peerKnown == VersionVector())
        #expect(Self.drain(&state) == [.delta("notes")])
    }

    @Test("Links are told only to a peer that takes them, and only when they change")
    func linksTold() {
        var old = State(now: .now)
        old.greet(Self.hello([]), removalsDigest: nil)
        old.relayLinks()
        #expect(Self.drain(&old).isEmpty, "an older build is sent no links")
        var state = State(now: .now)
        state.greet(Self.hello([], links: true), removalsDigest: nil)
        #expect(Self.drain(&state) == [.links])
        // Each answer is taken first: it changes the state (#expect's closure cannot).
        let none = state.linksToTell([]), first = state.linksToTell([Self.peerDevice])
        let again = state.linksToTell([Self.peerDevice]), emptied = state.linksToTell([])
        #expect(!none, "no links, and none told: nothing to send")
        #expect(first)
        #expect(!again)
        #expect(emptied)
    }

    @Test("A peer's claim about an origin we do not know yet is kept (bounded) and noted once we know it")
    func unknownClaims() {
        var state = Self.ready(ours: Self.vector([Self.a: 5]), theirs: VersionVector())
        // The peer says it has b's entry 3, before b's entries reach us: not noted yet.
        state.keepUnknownClaims(Self.vector([Self.a: 5, Self.b: 3]), of: "notes", ours: Self.vector([Self.a: 5]), saved: true)
        #expect(state.claimsNowKnown(of: "notes", in: Self.vector([Self.a: 5])) == nil)
        // b's entries arrive (from elsewhere): the peer is now known to have them.
        #expect(state.claimsNowKnown(of: "notes", in: Self.vector([Self.a: 5, Self.b: 3])) == Self.vector([Self.b: 3]))
        #expect(state.shared["notes"]?.acknowledged == Self.vector([Self.b: 3]))
        #expect(state.claimsNowKnown(of: "notes", in: Self.vector([Self.a: 5, Self.b: 3])) == nil, "taken out once noted")
        // A peer naming thousands of made-up origins fills only its bounded slots.
        let madeUp = VersionVector(Dictionary(uniqueKeysWithValues: (0..<1000).map { (ReplicaID(high: 99, low: UInt64($0)), UInt64(1)) }))
        state.keepUnknownClaims(madeUp, of: "notes", ours: VersionVector(), saved: true)
        #expect(state.shared["notes"]?.unknownClaims.counters.count == State.maximumUnknownClaims)
    }
}
