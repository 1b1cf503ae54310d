import Foundation
import HearthCore
import HearthTestSupport
import Testing

/// ``ReplicaFile/encode(_:header:)`` writes the file straight from the replica, sharing only
/// names, origins and signers; ``ReplicaFile/document(_:header:)`` is the same file as a
/// property-list tree, which the generic writer (``BinaryPropertyList/encode(_:)``) wrote
/// before: the bytes of earlier builds.
@Suite("Replica file codec")
struct ReplicaFileCodecTests {
    static let header = ReplicaFile.Header(storeIdentifier: "com.example.codec", account: "acct")

    @Test("Seeded random replicas: every reader reads the document, and the replica comes back; earlier builds' bytes read alike",
          arguments: 1...40)
    func roundTrip(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let replica = Self.randomReplica(&rng)
        let data = try ReplicaFile.encode(replica, header: Self.header)
        #expect(try ReplicaFile.encode(replica, header: Self.header) == data)

        let document = ReplicaFile.document(replica, header: Self.header)
        #expect(try BinaryPropertyList.decode(data) == document)

        let back = try ReplicaFile.decode(data, path: "new")
        #expect(back.header == Self.header && back.setAside.isEmpty)
        #expect(back.replica.entries == replica.entries)
        #expect(back.replica.id == replica.id && back.replica.clock == replica.clock && back.replica.sequence == replica.sequence)
        #expect(back.replica.vector == replica.vector && back.replica.peerVectors == replica.peerVectors)
        #expect(back.replica.history == replica.history)
        #expect(back.replica.certificates == replica.certificatesInUse)
        #expect(back.replica.hasSynced == replica.hasSynced && back.replica.wantsWhole == replica.wantsWhole)

        // A file of an earlier build: the generic writer's bytes of the same document.
        let earlier = try ReplicaFile.decode(try BinaryPropertyList.encode(document), path: "earlier")
        #expect(earlier.replica == back.replica && earlier.header == back.header)
    }

    static func randomReplica(_ rng: inout SplitMix64) -> Replica {
        func pick<T>(_ items: [T]) -> T { items[Int(rng.next() % UInt64(items.count))] }
        let origins = (0..<1 + rng.next() % 6).map { _ in ReplicaID(high: rng.next(), low: rng.next()) }
        let signers = (0..<rng.next() % 4).map { Data(repeating: UInt8($0 + 1), count: 32) }
        let values: [PropertyListValue] = BinaryPropertyListTests.samples + ["x", "x", 7, 7]
        let keyNames = ["a", "b", "key", "value", "é", "e\u{301}", "🏠", "timestamps", "k1", "k2", "k3", ""]
        var entries: [StoreKey: Entry] = [:]
        var sequences: [ReplicaID: UInt64] = [:]
        for name in keyNames where rng.next() % 4 != 0 {
            let origin = pick(origins)
            sequences[origin, default: 0] += 1 + rng.next() % 3
            var entry = Entry(key: StoreKey(name), value: rng.next() % 5 == 0 ? nil : pick(values) as PropertyListValue,
                              timestamp: HLCTimestamp(milliseconds: 1_700_000_000_000 + rng.next() % 100_000, counter: UInt16(rng.next() % 3)),
                              origin: origin, sequence: sequences[origin]!)
            if !signers.isEmpty, rng.next() % 3 != 0 {
                entry.signature = EntrySignature(signer: pick(signers), bytes: Data((0..<64).map { _ in UInt8(truncatingIfNeeded: rng.next()) }))
            }
            entries[entry.key] = entry
        }
        var peers: [String: VersionVector] = [:]
        for device in 0..<rng.next() % 4 {
            peers[String(format: "%064x", device + 1)] = VersionVector(Dictionary(uniqueKeysWithValues: origins.map { ($0, rng.next() % 9) }))
        }
        var superseded: [StoreKey: [HLCTimestamp]] = [:]
        for key in entries.keys where rng.next() % 2 == 0 {
            superseded[key] = (0..<1 + rng.next() % 4).map { HLCTimestamp(milliseconds: 1_600_000_000_000 + $0 * 1000, counter: 0) }
        }
        var certificates: [Data: Data] = [:]
        for signer in signers + [Data(repeating: 0xEE, count: 32)] { certificates[signer] = Data("certificate of \(signer[0])".utf8) }
        var replica = Replica(id: pick(origins), clock: HybridLogicalClock(last: HLCTimestamp(milliseconds: 1_700_000_200_000, counter: 1)),
                              sequence: rng.next() % 50, vector: VersionVector(), entries: entries, peerVectors: peers,
                              certificates: certificates,
                              history: StampHistory(collected: HLCTimestamp(rawValue: rng.next() % 1000), superseded: superseded))
        replica.hasSynced = rng.next() % 2 == 0
        replica.wantsWhole = rng.next() % 2 == 0
        return replica
    }
}
