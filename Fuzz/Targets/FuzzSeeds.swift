import Foundation
import HearthCore
import HearthDiscovery
import HearthIdentity
import HearthSync

/// Valid encodings of each target's input, made by the library itself: the fuzzer starts
/// from inputs that pass the outer checks, so its mutations reach the inner ones.
package enum FuzzSeeds {
    /// Seeds for `target`.
    package static func seeds(for target: FuzzTarget) throws -> [Data] {
        switch target {
        case .binaryPlist:
            return try values().map { try BinaryPropertyList.encode($0) } + [Data(amplification(dataBytes: 64, references: 64))]
        case .syncMessage:
            return try messages().map { try $0.encoded() }
        case .frames:
            // A chunk-size byte, then frames: one message per frame, and all in one stream.
            let payloads = try messages().map { try $0.encoded() }
            var all = Data([7])
            var seeds: [Data] = []
            for payload in payloads {
                let frame = framed(payload)
                seeds.append(Data([UInt8(truncatingIfNeeded: payload.count)]) + frame)
                all += frame
            }
            return seeds + [all]
        case .txtRecord:
            let hash = String(repeating: "0123456789abcdef", count: 1)
            let records: [[String]] = [
                ["v=2", "a=\(hash)", "s=\(hash)", "d=\(hash)"],
                ["v=1", "a=\(hash)\(hash)", "s=\(hash)", "d=\(hash)", "future=x", "flag"],
                ["v=2", "a=\(hash)", "s=\(hash)"],
            ]
            return records.map { strings in Data(strings.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }) }
        case .joinBundle:
            let authority = try AccountAuthority.create(displayName: "Fuzz")
            let bundle = try JoinBundle.export(authority, passphrase: FuzzTarget.bundlePassphrase, scrypt: .testing)
            let other = try JoinBundle.export(authority, passphrase: "another passphrase", scrypt: .testing)
            return [bundle, other]
        case .storeFile:
            return try replicas().map { replica, account in
                try ReplicaFile.encode(replica, header: .init(storeIdentifier: "com.example.fuzz", account: account))
            }
        }
    }

    package static func framed(_ payload: Data) -> Data {
        let length = UInt32(payload.count)
        return Data([UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]) + payload
    }

    static func values() -> [PropertyListValue] {
        [
            .string("hello"), .string("ünïcødé ✓ 🎉"), .integer(0), .integer(-1), .integer(Int64.max), .double(3.25),
            .bool(true), .date(Date(timeIntervalSince1970: 1_700_000_000)), .data(Data(0..<40)),
            .array([.integer(1), .string("two"), .array([.bool(false)])]),
            .dictionary(["color": .string("blue"), "size": .integer(3), "nested": .dictionary(["list": .array([.double(1.5)])])]),
        ]
    }

    static func entries() -> [Entry] {
        let origin = ReplicaID(high: 0x0102_0304_0506_0708, low: 0x1112_1314_1516_1718)
        var list: [Entry] = []
        for (i, value) in values().enumerated() {
            var entry = Entry(key: StoreKey("key\(i)"), value: value, timestamp: HLCTimestamp(milliseconds: 1_700_000_000_000 + UInt64(i), counter: 0),
                              origin: origin, sequence: UInt64(i + 1))
            entry.signature = EntrySignature(signer: Data(repeating: 7, count: 32), bytes: Data(repeating: 9, count: 64))
            list.append(entry)
        }
        list.append(Entry(key: "gone", value: nil, timestamp: HLCTimestamp(milliseconds: 1_700_000_000_100, counter: 2), origin: origin, sequence: 40))
        return list
    }

    static func messages() -> [SyncMessage] {
        let origin = ReplicaID(high: 1, low: 2)
        let vector = VersionVector([origin: 12, ReplicaID(high: 3, low: 4): 7])
        let device = Data(repeating: 0xAB, count: 32)
        let store = "com.example.fuzz"
        return [
            .hello(.init(account: Data(repeating: 0xAB, count: 32),
                         stores: [.init(identifier: store, vectorDigest: SyncMessage.vectorDigest(vector), peersDigest: SyncMessage.peersDigest([device]),
                                        vector: vector),
                                  .init(identifier: "com.example.other", vectorDigest: SyncMessage.vectorDigest(VersionVector()),
                                        peersDigest: SyncMessage.peersDigest([]))],
                         removalsDigest: Data(repeating: 9, count: 8))),
            .store(.init(store: store, vector: vector, peers: [device, Data(repeating: 0xCD, count: 32)])),
            .store(.init(store: "com.example.other", left: true)),
            .delta(.init(store: store, entries: entries(), certificates: [Data(repeating: 0x30, count: 100)], vector: vector, more: true)),
            .delta(.init(store: store, entries: [], certificates: [], vector: VersionVector())),
            .ack(.init(store: store, vector: vector)), .ping([store: vector]), .pong([:]), .pong([store: vector]),
            .links(.init(devices: [device], stores: [store: vector])),
            .refused(.init(store: store, entries: [RefusedEntry(entries()[0], reason: .tooLarge, detail: "too large")], clock: 99)),
        ]
    }

    static func replicas() -> [(Replica, String)] {
        var replica = Replica(id: ReplicaID(high: 5, low: 6))
        for (i, value) in values().enumerated() {
            replica.write(value, forKey: StoreKey("key\(i)"), wall: 1_700_000_000_000 + UInt64(i))
        }
        replica.write(nil, forKey: "key0", wall: 1_700_000_000_500)
        for entry in entries() { replica.merge(entry, wall: 1_700_000_001_000) }
        return [(replica, ""), (Replica(id: ReplicaID(high: 7, low: 8)), String(repeating: "cd", count: 32))]
    }

    /// Issue 12 point 1, scaled: a root array referencing one data object of `dataBytes`
    /// bytes `references` times. 64 KB × 12,000 is 88 KB on disk and 786 MB if expanded,
    /// past the fuzzers' 512 MB RSS budget without the decoder's expansion budget.
    package static func amplification(dataBytes: Int = 64 << 10, references: Int = 12_000) -> [UInt8] {
        var plist = RawBinaryPlist()
        let root = plist.add(.array([]))
        let data = plist.add(.data(count: dataBytes))
        plist.objects[root] = .array(Array(repeating: data, count: references))
        return plist.bytes()
    }

    /// The same inside a delta (point 1 as a peer sends it): one entry whose value is the
    /// shared-reference array.
    package static func amplifiedDelta(dataBytes: Int = 64 << 10, references: Int = 12_000) -> [UInt8] {
        var plist = RawBinaryPlist()
        let root = plist.add(.string(""))
        let data = plist.add(.data(count: dataBytes))
        let bomb = plist.add(.array(Array(repeating: data, count: references)))
        // Protocol 4's names: type, entries, certificates, vector, store; an entry's key, value, timestamp, origin, sequence.
        let keys = ["t", "e", "c", "v", "k", "v", "t", "o", "n", "s"].map { plist.add(.string($0)) }
        let delta = plist.add(.string("delta")), name = plist.add(.string("bomb"))
        let origin = plist.add(.data(count: 16)), number = plist.add(.integer(1))
        let entry = plist.add(.dictionary([(keys[4], name), (keys[5], bomb), (keys[6], number), (keys[7], origin), (keys[8], number)]))
        let entries = plist.add(.array([entry])), empty = plist.add(.array([])), vector = plist.add(.data(count: 0))
        plist.objects[root] = .dictionary([(keys[0], delta), (keys[9], name), (keys[1], entries), (keys[2], empty), (keys[3], vector)])
        return plist.bytes()
    }

    /// The same inside a replica file: the entry is set aside, the file loads.
    package static func amplifiedReplicaFile(dataBytes: Int = 64 << 10, references: Int = 12_000) -> [UInt8] {
        var plist = RawBinaryPlist()
        let root = plist.add(.string(""))
        let data = plist.add(.data(count: dataBytes))
        let bomb = plist.add(.array(Array(repeating: data, count: references)))
        func string(_ text: String) -> Int { plist.add(.string(text)) }
        let origin = plist.add(.data(count: 16)), number = plist.add(.integer(1)), empty = plist.add(.dictionary([]))
        let entry = plist.add(.dictionary([(string("key"), string("bomb")), (string("value"), bomb), (string("timestamp"), number),
                                           (string("origin"), origin), (string("sequence"), number)]))
        let entries = plist.add(.array([entry]))
        plist.objects[root] = .dictionary([
            (string("format"), string(ReplicaFile.format)), (string("version"), plist.add(.integer(2))),
            (string("storeIdentifier"), string("com.example.fuzz")), (string("account"), string("")),
            (string("replica"), origin), (string("clock"), number), (string("sequence"), number),
            (string("vector"), empty), (string("entries"), entries),
        ])
        return plist.bytes()
    }

    /// A join bundle whose key asks for costly scrypt `parameters` (point 7: p = 8000 kept
    /// `hearth account join` busy for over a minute).
    package static func costlyBundle(n: UInt64, r: UInt64, p: UInt64) throws -> [UInt8] {
        let authority = try AccountAuthority.create(displayName: "Costly")
        let text = String(decoding: try JoinBundle.export(authority, passphrase: FuzzTarget.bundlePassphrase, scrypt: .testing), as: UTF8.self)
        guard let start = text.range(of: "-----BEGIN ENCRYPTED PRIVATE KEY-----") else { return [] }
        var key = try EncryptedPrivateKeyInfo(pem: String(text[start.lowerBound...]))
        key.parameters = ScryptParameters(n: n, r: r, p: p)
        return Array((text[..<start.lowerBound] + key.pem).utf8)
    }
}
