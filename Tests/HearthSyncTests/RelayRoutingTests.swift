import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import HearthTestSupport
import Testing

/// The decisions about relaying, run as values: what a delta leaves to the peer's links
/// (`DeltaPlan`, direct first), what a delta applied asks of the other sessions
/// (`SessionState.deltaApplied`), which sessions that goes to and who is admitted (`Routing`).
/// No engine, no link, no clock; the randomized case is seeded.
@Suite("Relay routing (values)")
struct RelayRoutingTests {
    typealias State = SessionState<String>

    /// Devices 1…n: their prefixes are distinct (the first byte differs).
    static func device(_ n: UInt8) -> DeviceID { DeviceID(bytes: [n] + [UInt8](repeating: 0, count: 31))! }
    static func origin(of device: DeviceID, _ low: UInt64 = 1) -> ReplicaID {
        ReplicaID(high: ReplicaID.devicePrefix(of: device.data), low: low)
    }
    static let us = device(1), peer = device(2), c = device(3), d = device(4)

    static func entry(by device: DeviceID, _ sequence: UInt64 = 1) -> Entry {
        Entry(key: StoreKey("k\(sequence)"), value: .integer(1), timestamp: HLCTimestamp(milliseconds: 1_700_000_000_000, counter: 0),
              origin: origin(of: device), sequence: sequence)
    }

    // MARK: Direct first

    @Test("A writer the peer is linked to, and that syncs the store with us, is left out; its counters are deferred, not sent")
    func linkedWriterIsLeftOut() {
        let ours = VersionVector([Self.origin(of: Self.us): 4, Self.origin(of: Self.c): 7, Self.origin(of: Self.d): 2])
        let plan = DeltaPlan(known: VersionVector(), linked: [Self.c, Self.d], sharers: [Self.c, Self.peer],
                             us: Self.us, peer: Self.peer, vector: ours)
        // c: linked and a sharer; d: linked but not known to serve the store (so it is not left to).
        #expect(plan.leftOut == [ReplicaID.devicePrefix(of: Self.c.data)])
        #expect(plan.deferred == VersionVector([Self.origin(of: Self.c): 7]))
        #expect(plan.basis == plan.deferred, "the delta is computed as if the peer had c's writes")
        #expect(plan.sent(ours) == VersionVector([Self.origin(of: Self.us): 4, Self.origin(of: Self.d): 2]))
    }

    @Test("A left-out writer's entry that arrived after the plan was made is left out too, and deferred: sent, it would cover the writer's earlier entries the peer may lack")
    func lateEntryOfLeftOutWriterIsLeftOut() {
        // Our vector when the plan was made: c's writes up to 7 (left to the peer's link to c).
        let before = VersionVector([Self.origin(of: Self.us): 4, Self.origin(of: Self.c): 7])
        var plan = DeltaPlan(known: VersionVector([Self.origin(of: Self.us): 3, Self.origin(of: Self.c): 2]),
                             linked: [Self.c], sharers: [Self.c], us: Self.us, peer: Self.peer, vector: before)
        // c's entry 9 reached us (another session applied it) before the delta was read.
        let after = VersionVector([Self.origin(of: Self.us): 4, Self.origin(of: Self.c): 9])
        let read = [Self.entry(by: Self.us, 4), Self.entry(by: Self.c, 9)]
        #expect(read.filter { !plan.basis.covers($0) } == read, "the basis, taken before, does not cover c's entry 9")
        let sent = plan.leavingOut(read, vector: after)
        #expect(sent == [Self.entry(by: Self.us, 4)])
        #expect(plan.deferred == VersionVector([Self.origin(of: Self.c): 9]))
        #expect(plan.basis.covers(Self.entry(by: Self.c, 9)))
        #expect(plan.sent(after) == VersionVector([Self.origin(of: Self.us): 4]), "the peer is not taken to have any of c's writes from us")
        // The peer, applying what was sent, covers none of c's entries 3…8 it may still lack.
        var peer = Replica(id: ReplicaID(high: ReplicaID.devicePrefix(of: Self.peer.data), low: 1))
        peer.apply(sent, wall: 1_700_000_000_000)
        #expect(peer.vector[Self.origin(of: Self.c)] == 0)
        // With no one left out, nothing is taken out.
        var whole = DeltaPlan(known: VersionVector(), linked: [], sharers: [Self.c], us: Self.us, peer: Self.peer, vector: before)
        #expect(whole.leavingOut(read, vector: after) == read && whole.deferred.counters.isEmpty)
    }

    @Test("The first delta (no links yet) is whole, and our own and the peer's writes are never left out")
    func firstDeltaIsWhole() {
        let ours = VersionVector([Self.origin(of: Self.us): 4, Self.origin(of: Self.peer): 3])
        let first = DeltaPlan(known: VersionVector(), linked: [], sharers: [Self.c], us: Self.us, peer: Self.peer, vector: ours)
        #expect(first.leftOut.isEmpty && first.deferred.counters.isEmpty && first.sent(ours) == ours)
        let later = DeltaPlan(known: VersionVector(), linked: [Self.us, Self.peer], sharers: [Self.us, Self.peer],
                              us: Self.us, peer: Self.peer, vector: ours)
        #expect(later.leftOut.isEmpty)
    }

    @Test("Nothing is sent when the peer lacks nothing; an empty delta goes when our vector says more than the basis")
    func worthSending() {
        let v = VersionVector([Self.origin(of: Self.us): 4])
        let plan = DeltaPlan(known: v, linked: [], sharers: [], us: Self.us, peer: Self.peer, vector: v)
        #expect(!plan.worthSending(entries: 0, vector: v))
        #expect(plan.worthSending(entries: 1, vector: v))
        #expect(plan.worthSending(entries: 0, vector: VersionVector([Self.origin(of: Self.us): 5])))
    }

    @Test("Seeded: for random links and sharers, exactly the linked sharers but us and the peer are left out, and the basis only grows by them")
    func randomizedPlans() {
        var random = SplitMix64(seed: 27)
        let devices = (1...8).map { Self.device(UInt8($0)) }
        for _ in 0..<500 {
            let us = devices[Int(random.next() % 8)], peer = devices[Int(random.next() % 8)]
            let linked = Set(devices.filter { _ in random.next() % 2 == 0 })
            let sharers = Set(devices.filter { _ in random.next() % 2 == 0 })
            let ours = VersionVector(Dictionary(uniqueKeysWithValues: devices.map { (Self.origin(of: $0), random.next() % 10 + 1) }))
            let known = ours.filter { _ in random.next() % 3 == 0 }
            let plan = DeltaPlan(known: known, linked: linked, sharers: sharers, us: us, peer: peer, vector: ours)
            let expected = Set(linked.intersection(sharers).subtracting([us, peer]).map { ReplicaID.devicePrefix(of: $0.data) })
            #expect(plan.leftOut == expected)
            #expect(plan.basis == known.union(plan.deferred))
            #expect(plan.deferred.counters.keys.allSatisfy { expected.contains($0.devicePrefix) })
            #expect(plan.sent(ours).union(plan.deferred) == ours)
        }
    }

    // MARK: After a delta is applied

    static func sharedState() -> State {
        var state = State(now: .now)
        state.helloSent(listing: ["notes"])
        state.greet(SyncMessage.Hello(account: Data(count: 32), stores: [.init(identifier: "notes", vectorDigest: Data([1]), peersDigest: Data([1]))]),
                    removalsDigest: nil)
        _ = state.receive(SyncMessage.StoreState(store: "notes", vector: VersionVector()), for: "notes", view: .init(vector: VersionVector()),
                          ourDevice: Self.us)
        while state.next() != nil {}
        return state
    }

    @Test("A delta that changed keys is relayed, its writers' linked peers told, and the sender acked")
    func changedDeltaIsRelayed() {
        var state = Self.sharedState()
        let applied = VersionVector([Self.origin(of: Self.c): 1])
        let effects = state.deltaApplied("notes", carried: 1, accepted: [Self.entry(by: Self.c)], changed: true, refused: [],
                                         clock: 0, applied: applied)
        #expect(effects == [.push("notes"), .originsLearned("notes"),
                            .tellLinkedPeers("notes", writers: [ReplicaID.devicePrefix(of: Self.c.data)])])
        #expect(state.next() == .ack(.init(store: "notes", vector: applied)))
    }

    @Test("A delta that changed nothing is not relayed; an empty one is not acked; a refused entry is told before the ack")
    func unchangedDeltaIsNotRelayed() {
        var state = Self.sharedState()
        let v = VersionVector([Self.origin(of: Self.c): 1])
        // Already had it: accepted entries are only those that win, so none; nothing changed.
        #expect(state.deltaApplied("notes", carried: 1, accepted: [], changed: false, refused: [], clock: 0, applied: v).isEmpty)
        #expect(state.next() == .ack(.init(store: "notes", vector: v)))
        #expect(state.deltaApplied("notes", carried: 0, accepted: [], changed: false, refused: [], clock: 0, applied: v).isEmpty)
        #expect(state.next() == nil, "an empty delta is not acked")
        let refused = RefusedEntry(key: StoreKey("k"), origin: Self.origin(of: Self.c), sequence: 2, reason: .badSignature, detail: "test")
        _ = state.deltaApplied("notes", carried: 1, accepted: [], changed: false, refused: [refused], clock: 42, applied: v)
        #expect(state.next() == .refused(.init(store: "notes", entries: [refused], clock: 42)))
        #expect(state.next() == .ack(.init(store: "notes", vector: v)))
    }

    @Test("A delta whose sender has all we have is relayed to the others only; one that leaves us ahead goes to every session")
    func senderWithAllIsNotPushed() {
        var state = Self.sharedState()
        let applied = VersionVector([Self.origin(of: Self.c): 1])
        let covering = state.deltaApplied("notes", carried: 1, accepted: [], changed: true, refused: [], clock: 0, applied: applied,
                                          senderHas: applied.union(VersionVector([Self.origin(of: Self.d): 2])))
        #expect(covering == [.pushOthers("notes")])
        let ahead = applied.union(VersionVector([Self.origin(of: Self.us): 3]))
        let behind = state.deltaApplied("notes", carried: 1, accepted: [], changed: true, refused: [], clock: 0, applied: ahead,
                                        senderHas: applied)
        #expect(behind == [.push("notes")], "the sender lacks our write: its session must send it")
    }

    @Test("Held acks: an ack alone waits for the timer or for another frame, travels with that frame, and a refusal is not held")
    func heldAcks() {
        var state = Self.sharedState()
        state.mailbox.holdsAcks = true
        let v = VersionVector([Self.origin(of: Self.c): 1])
        _ = state.deltaApplied("notes", carried: 1, accepted: [], changed: false, refused: [], clock: 0, applied: v)
        #expect(!state.mailbox.hasSendable, "nothing to wake the writer for")
        #expect(state.next() == nil)
        let first = state.mailbox.heldAcksNeedTimer(), second = state.mailbox.heldAcksNeedTimer()
        #expect(first)
        #expect(!second, "one timer however many acks")
        // A later delta's ack replaces the held one.
        let w = VersionVector([Self.origin(of: Self.c): 2])
        _ = state.deltaApplied("notes", carried: 1, accepted: [], changed: false, refused: [], clock: 0, applied: w)
        #expect(state.next() == nil)
        state.mailbox.ackTimerFired()
        #expect(state.mailbox.hasSendable)
        #expect(state.next() == .ack(.init(store: "notes", vector: w)))
        #expect(state.next() == nil)
        // Past the timer, acks are held again.
        _ = state.deltaApplied("notes", carried: 1, accepted: [], changed: false, refused: [], clock: 0, applied: v)
        #expect(state.next() == nil)
        // Another frame goes out (a ping): the held ack goes with it, in the same flush.
        state.mailbox.ping = true
        #expect(state.mailbox.hasSendable)
        #expect(state.next() == .ping)
        state.mailbox.frameSent()
        #expect(state.next() == .ack(.init(store: "notes", vector: v)))
        #expect(state.next() == nil)
        // A refusal goes at once, and its ack with it.
        let refused = RefusedEntry(key: StoreKey("k"), origin: Self.origin(of: Self.c), sequence: 2, reason: .badSignature, detail: "test")
        _ = state.deltaApplied("notes", carried: 1, accepted: [], changed: false, refused: [refused], clock: 7, applied: v)
        #expect(state.mailbox.hasSendable)
        #expect(state.next() == .refused(.init(store: "notes", entries: [refused], clock: 7)))
        state.mailbox.frameSent()
        #expect(state.next() == .ack(.init(store: "notes", vector: v)))
    }

    @Test("An ack is noted only for origins we know; others wait until we know them")
    func acknowledge() {
        var state = Self.sharedState()
        let ours = VersionVector([Self.origin(of: Self.us): 3])
        let claimed = VersionVector([Self.origin(of: Self.us): 3, Self.origin(of: Self.c): 5])
        let noted = state.acknowledge(claimed, of: "notes", ours: ours, known: true, saved: true)
        #expect(noted == .notePeer(acknowledged: ours))
        let elsewhere = state.acknowledge(claimed, of: "other", ours: ours, known: true, saved: true)
        #expect(elsewhere == nil, "a store not synced here")
        let known = state.claimsNowKnown(of: "notes", in: claimed)
        #expect(known == VersionVector([Self.origin(of: Self.c): 5]))
    }

    @Test("Our vector is told soon only to a peer linked to one of the writers, once while one is pending")
    func tellVectorSoon() {
        var state = Self.sharedState()
        let c = ReplicaID.devicePrefix(of: Self.c.data)
        let unlinked = state.tellVectorSoon(of: "notes", ifLinkedTo: [c])
        #expect(!unlinked, "not linked to c")
        state.peerLinked([Self.c])
        let first = state.tellVectorSoon(of: "notes", ifLinkedTo: [c])
        let second = state.tellVectorSoon(of: "notes", ifLinkedTo: [c])
        let unshared = state.tellVectorSoon(of: "other", ifLinkedTo: [c])
        #expect(first)
        #expect(!second, "one is pending already")
        #expect(!unshared, "a store not shared")
        state.vectorTellDue(of: "notes")
        #expect(state.next() == .state("notes", peers: false))
    }

    // MARK: The engine's sessions

    final class Session: Sendable {
        let name: String
        init(_ name: String) { self.name = name }
    }

    @Test("Of two connections to one peer both ends keep the one dialled by the smaller device; a removed device is refused")
    func admission() {
        var routing = Routing<Session>()
        let dialledByPeer = Session("dialled by the peer"), dialledByUs = Session("dialled by us")
        // us (1) < peer (2): the connection we dialled wins, whichever comes first.
        guard case .accepted(nil) = routing.admit(dialledByPeer, peer: Self.peer, initiator: Self.peer, removed: false) else {
            Issue.record("the first connection was not admitted"); return
        }
        guard case .accepted(let replaced) = routing.admit(dialledByUs, peer: Self.peer, initiator: Self.us, removed: false) else {
            Issue.record("the connection dialled by the smaller device was refused"); return
        }
        #expect(replaced === dialledByPeer)
        guard case .duplicate = routing.admit(Session("again by the peer"), peer: Self.peer, initiator: Self.peer, removed: false) else {
            Issue.record("a connection dialled by the greater device replaced the kept one"); return
        }
        #expect(routing[Self.peer] === dialledByUs)
        // Two dialled by the same device (it redialled): the newer is kept.
        let redialled = Session("redialled by us")
        guard case .accepted(let older) = routing.admit(redialled, peer: Self.peer, initiator: Self.us, removed: false) else {
            Issue.record("a newer connection dialled by the same device was refused"); return
        }
        #expect(older === dialledByUs)
        guard case .removed = routing.admit(Session("removed"), peer: Self.c, initiator: Self.c, removed: true) else {
            Issue.record("a removed device was admitted"); return
        }
        #expect(routing[Self.c] == nil)
        // The replaced session ending takes nothing out; the kept one's does.
        let removedReplaced = routing.remove(dialledByUs, peer: Self.peer)
        let removedKept = routing.remove(redialled, peer: Self.peer)
        #expect(!removedReplaced)
        #expect(removedKept && routing.isEmpty)
    }

    @Test("A push goes to every session; a tell of our vector to all but the sender; links name the others, sorted")
    func targets() {
        var routing = Routing<Session>()
        for device in [Self.d, Self.peer, Self.c] { _ = routing.admit(Session("\(device.short)"), peer: device, initiator: Self.us, removed: false) }
        #expect(routing.targets(of: .push("notes"), from: Self.peer).count == 3)
        #expect(Set(routing.targets(of: .pushOthers("notes"), from: Self.peer).map(\.name)) == [Self.c.short, Self.d.short])
        #expect(Set(routing.targets(of: .tellLinkedPeers("notes", writers: []), from: Self.peer).map(\.name)) == [Self.c.short, Self.d.short])
        #expect(routing.linked(except: Self.c) == [Self.peer, Self.d])
        #expect(Routing<Session>.onRemovals([Self.c], peer: Self.c, us: Self.us) == .expel)
        #expect(Routing<Session>.onRemovals([Self.us], peer: Self.c, us: Self.us) == .close)
        #expect(Routing<Session>.onRemovals([Self.d], peer: Self.c, us: Self.us) == .relay)
    }
}
