import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import Testing

/// Direct first (``DeltaPlan``) against the invariant "a vector covers only what its replica
/// holds", with the relay's session state, its replica and the peer's replica driven by hand:
/// a relay that deferred a writer's entries to the peer's link to it, then lost its own link to
/// that writer, relayed the writer's later entries from the deferred counter up, and the peer,
/// advancing its vector to each, covered the deferred ones it never got: if its link to the
/// writer then dropped before they came, no one sent them again (seen once in RandomizedTests,
/// sessions on several threads beside 4 CPU hogs: one replica kept an older value for good).
extension SessionStateTests {
    static func entry(_ sequence: UInt64) -> Entry {
        Entry(key: StoreKey("k\(sequence)"), value: .integer(Int64(sequence)), timestamp: HLCTimestamp(milliseconds: 1_000 + sequence, counter: 0),
              origin: a, sequence: sequence)
    }

    @Test("Direct first: a writer that no longer syncs with us is not left out, and what was deferred to it is sent again, so the peer never covers entries it lacks")
    func writerNoLongerOurs() throws {
        let wall: UInt64 = 10_000
        var relay = Replica(id: Self.b)
        var peer = Replica(id: ReplicaID(high: 3, low: 3))
        // Our first delta (whole) found nothing to send; A's writer, linked to the peer, is ours too.
        var state = Self.ready(ours: relay.vector, theirs: VersionVector())
        _ = Self.drain(&state)
        state.peerLinked([Self.writerOfA])
        state.deltaSent(VersionVector(), of: "notes")
        func send(sharers: Set<DeviceID>) throws {
            let basis = state.deltaBasis(of: "notes", sharers: sharers)
            let (_, known, linked) = try #require(basis)
            var plan = DeltaPlan(known: known, linked: linked, sharers: sharers, us: Self.ourDevice, peer: Self.peer, vector: relay.vector)
            let vector = relay.vector
            let entries = plan.leavingOut(relay.delta(for: plan.basis), vector: vector)
            peer.apply(entries, wall: wall)
            state.deltaSent(plan.sent(vector), deferred: plan.deferred, of: "notes")
        }
        // A's entries 1-5 reach us from A: left to the peer's link to A (deferred).
        relay.apply((1...5).map(Self.entry), wall: wall)
        try send(sharers: [Self.writerOfA, Self.peer])
        #expect(peer.entries.isEmpty, "left to the writer's link")
        // Our link to A ends; its entries 6-8 reach us through another device, and go to the peer.
        relay.apply((6...8).map(Self.entry), wall: wall)
        try send(sharers: [Self.peer])
        // The peer's vector covers only what it holds: else, its link to A dropping before A's
        // push of 1-5 came, A (told its vector) and we would never send them again.
        let lacking = relay.entries.values.filter { peer.vector.covers($0) && peer.entries[$0.key] != $0 }.map(\.sequence).sorted()
        #expect(lacking.isEmpty, "the peer's vector covers entries \(lacking) of A it never got")
        #expect(peer.entries.count == 8)
    }
}
