import Foundation
@testable import Hearth
import HearthCore
import Testing

/// Issue 26 point 5: one device may have at most `Replica.maximumOriginsPerDevice` origins
/// owning entries in a replica; another device's origins, and this device's own, are not bounded.
@Suite("Origins per device")
struct OriginBoundTests {
    static let member = Data(repeating: 0x66, count: 32)
    /// The replica's wall clock: at the entries' time.
    static let wall: UInt64 = 1_800_000_000_000

    static func tombstone(_ key: String, origin: ReplicaID, signer: Data = member) -> Entry {
        Entry(key: StoreKey(key), value: nil, timestamp: HLCTimestamp(milliseconds: 1_700_000_000_000, counter: 0), origin: origin, sequence: 1,
              signature: EntrySignature(signer: signer, bytes: Data([1])))
    }

    @Test("Issue 26 point 5: a member's entries that would give it one origin too many are refused; an honest device's new origin is taken")
    func memberOriginsBounded() {
        let own = Data(repeating: 0x22, count: 32), honest = Data(repeating: 0x11, count: 32)
        var replica = Replica(id: ReplicaID.random(boundTo: own))
        let bound = Replica.maximumOriginsPerDevice
        replica.apply((0..<(bound - 1)).map { Self.tombstone("m\($0)", origin: ReplicaID.random(boundTo: Self.member)) }, wall: Self.wall)
        #expect(replica.deviceOrigins[ReplicaID.random(boundTo: Self.member).devicePrefix] == bound - 1)
        let last = ReplicaID.random(boundTo: Self.member), extra = ReplicaID.random(boundTo: Self.member)
        let existing = replica.entries["m0"]!.origin
        let delta = [Self.tombstone("a", origin: last), Self.tombstone("b", origin: last), Self.tombstone("c", origin: extra),
                     Self.tombstone("d", origin: existing), Self.tombstone("h", origin: ReplicaID.random(boundTo: honest), signer: honest),
                     Self.tombstone("o", origin: ReplicaID.random(boundTo: own), signer: own)]
        let (accepted, overQuota, newOrigin) = SyncedReplica.withinSignerShares(delta, of: replica)
        #expect(accepted.map(\.key) == ["a", "b", "d", "h", "o"])
        #expect(overQuota.isEmpty)
        #expect(newOrigin.map(\.key) == ["c"])
        replica.apply(accepted, wall: Self.wall)
        #expect(replica.deviceOrigins[last.devicePrefix] == bound)
        // The member's origin owning nothing any more frees its place.
        let (_, _, stillRefused) = SyncedReplica.withinSignerShares([Self.tombstone("e", origin: extra)], of: replica)
        #expect(stillRefused.count == 1)
        replica.apply([Entry(key: "a", value: 1, timestamp: HLCTimestamp(milliseconds: 1_800_000_000_000, counter: 0), origin: ReplicaID.random(boundTo: honest), sequence: 2,
                             signature: EntrySignature(signer: honest, bytes: Data([1]))),
                       Entry(key: "b", value: 1, timestamp: HLCTimestamp(milliseconds: 1_800_000_000_000, counter: 0), origin: ReplicaID.random(boundTo: honest), sequence: 3,
                             signature: EntrySignature(signer: honest, bytes: Data([1])))], wall: Self.wall)
        #expect(replica.deviceOrigins[last.devicePrefix] == bound - 1)
        let (taken, _, none) = SyncedReplica.withinSignerShares([Self.tombstone("e", origin: extra)], of: replica)
        #expect(taken.count == 1 && none.isEmpty)
    }
}
