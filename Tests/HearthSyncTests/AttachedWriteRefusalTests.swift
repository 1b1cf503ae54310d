import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import Testing

/// Issue 27 (left from issue 26 point 4): `hearth set` through an app that holds the store is
/// an attached process; its write of a key a member stamped 12 h ahead is stamped after that
/// value, in its own copy. The peer's refusal comes to the app's engine, which knew nothing of
/// why and blamed this device's clock ("0.0 h ahead"). In memory, from fixed clocks.
@Suite struct AttachedWriteRefusalTests {
    static let own = Data(repeating: 0x0A, count: 32)
    static let member = Data(repeating: 0x66, count: 32)

    @Test("A clockAhead refusal of an attached process's write of a key a member stamped ahead names the member, not this device's clock")
    func attachedWriteNamesTheMember() throws {
        let wall: UInt64 = 1_700_000_000_000
        let memberOrigin = ReplicaID.random(boundTo: Self.member)
        let pinned = Entry(key: "pinned", value: "the member's", timestamp: HLCTimestamp(milliseconds: wall + HybridLogicalClock.maximumDrift - 100, counter: 0),
                           origin: memberOrigin, sequence: 1, signature: EntrySignature(signer: Self.member, bytes: Data([1])))
        // The holder (the app) and the attached `hearth set`: two replicas of one device, both with the member's value.
        var holder = SyncedReplica(Replica(id: .random(boundTo: Self.own)))
        _ = holder.applyAdmitted([pinned], coveredBy: nil, wall: wall)
        var attached = Replica(id: .random(boundTo: Self.own))
        _ = attached.apply([pinned], wall: wall)
        let write = attached.write("the laptop's", forKey: "pinned", wall: wall + 10)
        let written = try #require(write)
        #expect(written.wins(over: pinned))
        _ = try holder.applyAttachedWrite(written, device: Self.own, wall: wall + 20, strict: false)

        // The kitchen, its clock as the holder's, refuses it; the holder's engine words it.
        let imposed = holder.imposedLead(forKey: "pinned", origin: written.origin, sequence: written.sequence)
        #expect(imposed?.signer == Self.member && imposed?.writer == written.origin)
        let kitchen = try #require(DeviceID(bytes: [UInt8](repeating: 0x11, count: 32)))
        let refusal = SyncRefusal(device: kitchen, entry: RefusedEntry(written, reason: .clockAhead, detail: "stamped …"),
                                  peerClock: wall + 30, localClock: wall + 30, imposedLead: imposed)
        #expect(refusal.description.contains("the value it replaces was stamped 12.0 h ahead of this device's clock by device 66666666"), "\(refusal.description)")
        #expect(!refusal.description.contains("this device's clock is 0.0 h"), "\(refusal.description)")
        // Another replica's write of the same sequence is not taken for it.
        #expect(holder.imposedLead(forKey: "pinned", origin: holder.replica.id, sequence: written.sequence) == nil)
    }
}
