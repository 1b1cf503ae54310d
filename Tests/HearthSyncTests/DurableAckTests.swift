import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import Testing

/// Tombstones are collected on what peers have saved, not on what they hold in memory
/// (docs/simulator.md, finding 1: seed 14 of 16 devices). Replayed in memory with the
/// product's `Replica`/`SyncedReplica` and `SessionState`, no engine, no clock.
@Suite("Tombstones collected on what peers saved (simulator finding 1)")
struct DurableAckTests {
    typealias State = SessionState<String>

    static let wall: UInt64 = 1_700_000_000_000
    static let peer = DeviceID(bytes: [UInt8](repeating: 7, count: 32))!
    static let ourDevice = DeviceID(bytes: [UInt8](repeating: 9, count: 32))!

    /// Applies the session's effects to our replica as `SyncStore.perform` does (the ones that matter here).
    static func perform(_ effects: [State.ReplicaEffect], on replica: inout SyncedReplica) {
        for case .notePeer(let vector) in effects {
            replica.notePeer(peer.hex, acknowledged: vector, wall: wall + 10)
        }
    }

    @Test("A peer's ack of a removal it has not saved yet keeps the tombstone; after its crash the tombstone still reaches it; its saved vector lets it go")
    func ackBeforeSave() throws {
        // Ours: a value, then its removal.
        var ours = SyncedReplica(Replica(id: ReplicaID(high: 1, low: 1)))
        _ = try ours.write(.string("old"), forKey: "k12", size: 8, wall: Self.wall, strict: false)
        let value = try #require(ours.entries["k12"])
        _ = try ours.write(nil, forKey: "k12", size: 0, wall: Self.wall + 1, strict: false)
        let removal = try #require(ours.entries["k12"])
        #expect(removal.isTombstone)

        // The peer (d1 of seed 14): it saved the value, then applied the removal and acked at once;
        // its write-behind save was due a second later.
        var theirs = Replica(id: ReplicaID(high: 2, low: 2))
        theirs.apply([value], wall: Self.wall)
        let saved = theirs
        theirs.apply([removal], wall: Self.wall + 2)
        #expect(theirs.vector.covers(removal) && !saved.vector.covers(removal))

        var session = State(now: .now)
        let opened = session.receive(SyncMessage.StoreState(store: "notes", vector: saved.vector), for: "notes",
                                     view: .init(vector: ours.vector), ourDevice: Self.ourDevice)
        Self.perform(opened, on: &ours)
        // Its ack, as its writer sends it: what it holds, and the part of it it has saved.
        let ack = SyncMessage.Ack(store: "notes", vector: theirs.vector, durable: saved.vector.intersection(theirs.vector))
        Self.perform(session.acknowledged(ack, ours: ours.vector), on: &ours)
        #expect(session.shared["notes"]?.acknowledged.covers(removal) == true, "the ack still settles the removal")
        #expect(ours.entries["k12"] == removal, "the tombstone was collected on an ack of what the peer held only in memory")

        // The peer loses power before its save: it comes back from its file, with the old value.
        let restarted = saved.reopened(as: ReplicaID(high: 2, low: 3))
        #expect(restarted.value(forKey: "k12") == .string("old"))
        var next = State(now: .now)
        Self.perform(next.receive(SyncMessage.StoreState(store: "notes", vector: restarted.vector), for: "notes",
                                  view: .init(vector: ours.vector), ourDevice: Self.ourDevice), on: &ours)
        let (_, known, _) = try #require(next.deltaBasis(of: "notes"))
        var healed = restarted
        healed.apply(ours.replica.delta(for: known), wall: Self.wall + 20)
        #expect(healed.value(forKey: "k12") == nil, "the removal reaches the restarted peer")

        // Once it says it saved the removal (a ping carries its saved vector), the tombstone goes.
        Self.perform(next.acknowledge(healed.vector, of: "notes", ours: ours.vector, known: false, saved: true).map { [$0] } ?? [],
                     on: &ours)
        #expect(ours.entries["k12"] == nil, "the tombstone is collected once every peer saved it")
    }

    @Test("An ack without `d` (an older build, or all of it saved) counts as saved")
    func ackWithoutDurable() throws {
        var ours = SyncedReplica(Replica(id: ReplicaID(high: 1, low: 1)))
        _ = try ours.write(.string("old"), forKey: "k", size: 6, wall: Self.wall, strict: false)
        _ = try ours.write(nil, forKey: "k", size: 0, wall: Self.wall + 1, strict: false)
        var session = State(now: .now)
        Self.perform(session.receive(SyncMessage.StoreState(store: "notes", vector: VersionVector()), for: "notes",
                                     view: .init(vector: ours.vector), ourDevice: Self.ourDevice), on: &ours)
        Self.perform(session.acknowledged(SyncMessage.Ack(store: "notes", vector: ours.vector), ours: ours.vector), on: &ours)
        #expect(ours.entries["k"] == nil)
    }

    @Test("An ack's saved vector travels as `d`; a request for the whole store as `w`")
    func wire() throws {
        let held = VersionVector([ReplicaID(high: 1, low: 1): 5])
        let saved = VersionVector([ReplicaID(high: 1, low: 1): 3])
        for ack in [SyncMessage.Ack(store: "notes", vector: held, durable: saved), SyncMessage.Ack(store: "notes", vector: held)] {
            #expect(try SyncMessage(decoding: SyncMessage.ack(ack).encoded()) == .ack(ack))
        }
        // And a request for the whole store (issue 28, the thief's copy): `w`, only with a vector.
        let whole = SyncMessage.StoreState(store: "notes", vector: held, whole: true)
        #expect(try SyncMessage(decoding: SyncMessage.store(whole).encoded()) == .store(whole))
        let bare = try SyncMessage(decoding: SyncMessage.store(.init(store: "notes", whole: true)).encoded())
        #expect(bare == .store(.init(store: "notes")))
    }
}
