import Foundation
import HearthCore
import Testing

/// The admission rules every replica applies (issue 27 point 2): in memory, no store, no clock.
@Suite("Synced replica: what may enter a replica")
struct SyncedReplicaTests {
    static let wall: UInt64 = 1_800_000_000_000
    static let own = Data(repeating: 0x01, count: 32)
    static let member = Data(repeating: 0x02, count: 32)

    static func signed(_ key: String, _ value: PropertyListValue?, origin: ReplicaID, sequence: UInt64, signer: Data = member,
                       at milliseconds: UInt64 = wall - 1000) -> Entry {
        Entry(key: StoreKey(key), value: value, timestamp: HLCTimestamp(milliseconds: milliseconds, counter: 0), origin: origin,
              sequence: sequence, signature: EntrySignature(signer: signer, bytes: Data([1])))
    }

    /// An attached process's write of `key`: stamped by it, under its own origin.
    static func attached(_ key: String, _ value: PropertyListValue?, origin: ReplicaID, sequence: UInt64) -> Entry {
        Entry(key: StoreKey(key), value: value, timestamp: HLCTimestamp(milliseconds: wall + sequence, counter: 0), origin: origin, sequence: sequence)
    }

    static func write(_ synced: inout SyncedReplica, _ value: PropertyListValue?, _ key: String, strict: Bool = false) throws(SyncedReplica.LocalRefusal) {
        let size: Int
        do throws(EntryRuleViolation) { size = try StoreLimits.check(key: StoreKey(key), value: value) } catch { throw .entry(error) }
        _ = try synced.write(value, forKey: StoreKey(key), size: size, wall: wall, strict: strict)
    }

    /// What `body` was refused with; `nil` if it went through.
    static func refusal(_ body: () throws(SyncedReplica.LocalRefusal) -> Void) -> SyncedReplica.LocalRefusal? {
        do { try body() } catch { return error }
        return nil
    }

    @Test("This process's writes and an attached process's are held to the same quotas, strict mode and per-entry rules")
    func oneLocalRule() throws {
        var synced = SyncedReplica(Replica(id: .random(boundTo: Self.own)))
        let app = ReplicaID.random(boundTo: Self.own)
        for i in 0..<StoreLimits.maximumKeyCount { try Self.write(&synced, .integer(Int64(i)), "k\(i)") }
        // A key too many, either way.
        #expect(Self.refusal { () throws(SyncedReplica.LocalRefusal) in try Self.write(&synced, 1, "new") } == .tooManyKeys)
        #expect(Self.refusal { () throws(SyncedReplica.LocalRefusal) in
            _ = try synced.applyAttachedWrite(Self.attached("new", 1, origin: app, sequence: 1), device: Self.own, wall: Self.wall, strict: false)
        } == .tooManyKeys)
        // Rewriting or deleting a key of a full store goes, either way.
        try Self.write(&synced, "rewritten", "k0")
        let rewritten = try synced.applyAttachedWrite(Self.attached("k1", "rewritten", origin: app, sequence: 2), device: Self.own, wall: Self.wall, strict: false)
        #expect(rewritten == ["k1"])
        try Self.write(&synced, nil, "k2")
        // Bytes: a value that would take the store past 1 MB, either way; one that shrinks it goes.
        let big = PropertyListValue.data(Data(count: StoreLimits.maximumTotalSize / 2))
        try Self.write(&synced, big, "k3")
        let total = synced.usage.bytes - synced.entries["k4"]!.quotaSize + "k4".utf8.count + big.canonicalSize
        #expect(Self.refusal { () throws(SyncedReplica.LocalRefusal) in try Self.write(&synced, big, "k4") } == .storeFull(total: total))
        #expect(Self.refusal { () throws(SyncedReplica.LocalRefusal) in
            _ = try synced.applyAttachedWrite(Self.attached("k4", big, origin: app, sequence: 3), device: Self.own, wall: Self.wall, strict: false)
        } == .storeFull(total: total))
        try Self.write(&synced, .data(Data(count: 10)), "k3")
        // The per-entry rules, for what comes off the attach socket: applied once, as it is read
        // (Entry.decode, as for a peer's entry), which measures the size the quotas above use.
        let tooLong = Self.attached(String(repeating: "x", count: 65), 1, origin: app, sequence: 4)
        var document = try BinaryPropertyList.Document(BinaryPropertyList.encode(tooLong.propertyList))
        guard case .failure(let refused) = Entry.decode(document.root, in: &document) else {
            Issue.record("an entry with a 65-byte key was read from the attach socket")
            return
        }
        #expect(refused.reason == .keyTooLong && refused.sequence == 4)
        let fine = Self.attached("k5", .data(Data(count: 100)), origin: app, sequence: 5)
        var fineDocument = try BinaryPropertyList.Document(BinaryPropertyList.encode(fine.propertyList))
        #expect(try Entry.decode(fineDocument.root, in: &fineDocument).get().quotaSize == fine.quotaSize)
        // Strict mode refuses both before the first sync.
        var fresh = SyncedReplica(Replica(id: .random(boundTo: Self.own)))
        #expect(Self.refusal { () throws(SyncedReplica.LocalRefusal) in try Self.write(&fresh, 1, "k", strict: true) } == .initialSyncPending)
        #expect(Self.refusal { () throws(SyncedReplica.LocalRefusal) in
            _ = try fresh.applyAttachedWrite(Self.attached("k", 1, origin: app, sequence: 1), device: Self.own, wall: Self.wall, strict: true)
        } == .initialSyncPending)
        fresh.initialSyncCompleted()
        try Self.write(&fresh, 1, "k", strict: true)
        // What an attached process wrote is signed here: it is among the entries to sign.
        let unsigned = Set(synced.unsignedEntries().map(\.key))
        #expect(unsigned.isSuperset(of: ["k0", "k1", "k3"]))
    }

    @Test("Entries the engine holds back, and those over their signer's share, keep the vector below them until they arrive")
    func heldBack() {
        var synced = SyncedReplica(Replica(id: .random(boundTo: Self.own)))
        let origin = ReplicaID.random(boundTo: Self.member)
        let ahead = Self.signed("a", "from the future", origin: origin, sequence: 1, at: Self.wall + HybridLogicalClock.maximumDrift + 1)
        let next = Self.signed("b", "now", origin: origin, sequence: 2)
        let (changed, refused) = synced.applyRemote([next], heldBack: [ahead], wall: Self.wall)
        #expect(changed == ["b"] && refused.isEmpty)
        #expect(synced.heldBack[origin]?.sequence == 1 && synced.heldBack[origin]?.value == nil)
        // Below the held entry: the peer sends it again.
        #expect(synced.vector[origin] == 0)
        // It comes again, acceptable now: the hold ends and the vector covers it, and the entry
        // after it, which the replica has (the advance held off while an entry was held back).
        _ = synced.applyRemote([ahead], heldBack: [], wall: Self.wall + HybridLogicalClock.maximumDrift)
        #expect(synced.heldBack.isEmpty && synced.vector[origin] == 2)

        // A signer's share: its keys beyond StoreLimits.maximumSignerKeys are refused and held back.
        let greedy = ReplicaID.random(boundTo: Self.member)
        let delta = (1...UInt64(StoreLimits.maximumSignerKeys + 3)).map { Self.signed("g\($0)", 1, origin: greedy, sequence: $0) }
        let (_, overShare) = synced.applyRemote(delta, heldBack: [], wall: Self.wall)
        #expect(overShare.count == 5 && overShare.allSatisfy { $0.reason == .signerQuota })
        #expect(synced.signerUsage[Self.member]?.keys == StoreLimits.maximumSignerKeys)
        let firstRefused = UInt64(StoreLimits.maximumSignerKeys - 1)
        #expect(synced.heldBack[greedy]?.sequence == firstRefused && synced.vector[greedy] == firstRefused - 1)
        // The signer deletes some of its keys: the refused entries fit now, and the hold ends.
        let deletes = (0..<5).map { Self.signed("g\($0 + 1)", nil, origin: origin, sequence: UInt64(3 + $0), at: Self.wall) }
        _ = synced.applyRemote(deletes, heldBack: [], wall: Self.wall)
        let (_, none) = synced.applyRemote(Array(delta.suffix(5)), heldBack: [], wall: Self.wall)
        #expect(none.isEmpty && synced.heldBack.isEmpty && synced.vector[greedy] == UInt64(delta.count))
    }

    @Test("At most maximumKnownDevices devices are known; a peer's repeated acknowledgement changes nothing to save")
    func peers() {
        var synced = SyncedReplica(Replica(id: .random(boundTo: Self.own)))
        let devices = (0..<300).map { String(format: "%064x", $0) }
        let none = synced.learnOf(devices: Array(devices.prefix(10)))
        let ignored = synced.learnOf(devices: devices)
        #expect(none == 0 && ignored == 300 - SyncedReplica.maximumKnownDevices)
        #expect(synced.peerVectors.count == SyncedReplica.maximumKnownDevices)

        // One peer: a tombstone it acknowledged is collected; the same acknowledgement again is no change.
        var alone = SyncedReplica(Replica(id: .random(boundTo: Self.own)))
        let origin = ReplicaID.random(boundTo: Self.member)
        _ = alone.applyRemote([Self.signed("k", nil, origin: origin, sequence: 1)], heldBack: [], wall: Self.wall)
        let first = alone.notePeer(devices[0], acknowledged: alone.vector, wall: Self.wall)
        #expect(first && alone.entries.isEmpty)
        let again = alone.notePeer(devices[0], acknowledged: alone.vector, wall: Self.wall)
        #expect(!again)
    }
}
