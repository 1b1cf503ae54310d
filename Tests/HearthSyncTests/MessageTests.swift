import Foundation
import HearthCore
import HearthSync
import Testing

@Suite("Sync messages")
struct MessageTests {
    let device = Data(repeating: 7, count: 32)

    @Test("A hello round-trips with its stores' digests; hellos of protocols 2 and 3 read, with no stores")
    func helloDigest() throws {
        let digest = SyncMessage.peersDigest([device, Data(repeating: 1, count: 32)])
        #expect(digest.count == 8)
        // The digest is of the set: order does not matter.
        #expect(digest == SyncMessage.peersDigest([Data(repeating: 1, count: 32), device]))
        let stores = [SyncMessage.Hello.Store(identifier: "s", vectorDigest: SyncMessage.vectorDigest(VersionVector()), peersDigest: digest)]
        let hello = SyncMessage.Hello(account: Data(repeating: 0xab, count: 32), stores: stores)
        #expect(try SyncMessage(decoding: SyncMessage.hello(hello).encoded()) == .hello(hello))
        // Protocol 3's hello (long field names, signed): it reads as far as its version.
        let three: PropertyListValue = ["type": "hello", "protocol": 3, "account": "ab", "device": .data(device), "stores": [],
                                        "signature": .data(Data(repeating: 3, count: 64))]
        guard case .hello(let previous) = try SyncMessage(decoding: BinaryPropertyList.encode(three)) else { Issue.record("not a hello"); return }
        #expect(previous.protocolVersion == 3 && previous.stores.isEmpty)
        // Protocol 2's hello: one store and a vector, no list. It reads, so the version is what is reported.
        let old: PropertyListValue = ["type": "hello", "protocol": 2, "account": "ab", "store": "s", "device": .data(device),
                                      "vector": .dictionary([:]), "signature": .data(Data(repeating: 3, count: 64))]
        guard case .hello(let older) = try SyncMessage(decoding: BinaryPropertyList.encode(old)) else { Issue.record("not a hello"); return }
        #expect(older.protocolVersion == 2)
        #expect(older.stores.isEmpty)
    }

    @Test("A hello of more than 1,024 stores, or naming one twice, is refused")
    func helloStoreCap() throws {
        func hello(_ names: [String]) -> SyncMessage {
            .hello(.init(account: Data(count: 32),
                         stores: names.map { .init(identifier: $0, vectorDigest: Data(count: 8), peersDigest: Data(count: 8)) }))
        }
        let most = (0..<SyncMessage.maximumStores).map { "com.example.store-\($0)" }
        let encoded = try hello(most).encoded()
        #expect(encoded.count <= SyncMessage.maximumHelloSize)
        #expect(try SyncMessage(decoding: encoded) == hello(most))
        #expect(throws: SyncProtocolError.self) { try SyncMessage(decoding: hello(most + ["one.more"]).encoded()) }
        #expect(throws: SyncProtocolError.self) { try SyncMessage(decoding: hello(["twice", "twice"]).encoded()) }
        let long = String(repeating: "x", count: SyncMessage.maximumStoreIdentifierBytes + 1)
        #expect(throws: SyncProtocolError.self) { try SyncMessage(decoding: hello([long]).encoded()) }
    }

    @Test("A store message keeps device IDs only, and at most 64 of them")
    func peersMessage() throws {
        let ids = (0..<100).map { Data(repeating: UInt8($0), count: 32) }
        let few = SyncMessage.store(.init(store: "s", vector: VersionVector(), peers: Array(ids.prefix(3))))
        #expect(try SyncMessage(decoding: few.encoded()) == few)
        guard case .store(let capped) = try SyncMessage(decoding: SyncMessage.store(.init(store: "s", peers: ids)).encoded()) else {
            Issue.record("not a store message")
            return
        }
        #expect(capped.peers == Array(ids.prefix(SyncMessage.maximumPeers)))
        #expect(capped.vector == nil)
        let mixed: PropertyListValue = ["t": "store", "s": "s", "p": [.data(device), .data(Data([1, 2])), "text"]]
        #expect(try SyncMessage(propertyList: mixed) == .store(.init(store: "s", peers: [device])))
        #expect(throws: SyncProtocolError.self) { try SyncMessage(propertyList: ["t": "store"]) }
        #expect(throws: SyncProtocolError.self) { try SyncMessage(propertyList: ["t": "delta", "e": [], "v": .data(Data())]) }
    }

    @Test("A packed vector round-trips, takes 17 bytes per small counter, and only its one form reads")
    func packedVector() throws {
        let a = ReplicaID(high: 1, low: 2), b = ReplicaID(high: 1, low: 3), c = ReplicaID(high: 9, low: 0)
        let vector = VersionVector([a: 1, b: 300, c: .max])
        #expect(VersionVector(packed: vector.packed) == vector)
        #expect(VersionVector([a: 5]).packed.count == 17)
        #expect(vector.packed.count == 17 + 18 + 26)
        #expect(VersionVector(packed: Data()) == VersionVector())
        let one = VersionVector([a: 5]).packed, other = VersionVector([b: 5]).packed
        #expect(VersionVector(packed: other + one) == nil, "origins out of order")
        #expect(VersionVector(packed: one + one) == nil, "an origin twice")
        #expect(VersionVector(packed: one.dropLast()) == nil, "truncated")
        #expect(VersionVector(packed: one + Data([0])) == nil, "trailing byte")
        #expect(VersionVector(packed: Data(a.bytes) + Data([0])) == nil, "a zero counter")
        #expect(VersionVector(packed: Data(a.bytes) + Data([0x85, 0x00])) == nil, "not the shortest form")
        #expect(VersionVector(packed: Data(a.bytes) + Data(repeating: 0xff, count: 10) + Data([1])) == nil, "over 64 bits")
        #expect(VersionVector(packed: VersionVector([a: 1, b: 1, c: 1]).packed, maximumOrigins: 2) == nil, "over the cap")
    }

    @Test("A delta leaves out the signer of the sender's own entries; the receiver puts it back")
    func senderSigner() throws {
        let sender = Data(repeating: 5, count: 32), other = Data(repeating: 6, count: 32)
        let origin = ReplicaID.random(boundTo: sender)
        func entry(_ key: String, signer: Data) -> Entry {
            Entry(key: StoreKey(key), value: .string("v"), timestamp: HLCTimestamp(milliseconds: 1, counter: 0), origin: origin,
                  sequence: 1, signature: EntrySignature(signer: signer, bytes: Data(repeating: 1, count: 64)))
        }
        let delta = SyncMessage.delta(.init(store: "s", entries: [entry("own", signer: sender), entry("relayed", signer: other)],
                                            certificates: [], vector: VersionVector([origin: 1])))
        let compact = try delta.encoded(sender: sender), full = try delta.encoded()
        #expect(full.count - compact.count >= 32)
        #expect(try SyncMessage(decoding: compact, sender: sender) == delta)
        #expect(try SyncMessage(decoding: full, sender: sender) == delta)
        // With no sender known, a signature without a signer is refused, alone.
        guard case .delta(let read) = try SyncMessage(decoding: compact) else { Issue.record("not a delta"); return }
        #expect(read.entries.map(\.key) == [StoreKey("relayed")])
        #expect(read.undecodable.map(\.key) == [StoreKey("own")])
    }
}
