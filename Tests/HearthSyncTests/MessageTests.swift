import Foundation
import HearthCore
import HearthSync
import Testing

@Suite("Sync messages")
struct MessageTests {
    let device = Data(repeating: 7, count: 32)

    @Test("A hello round-trips with its stores' digests; a hello of protocol 2 reads, with no stores")
    func helloDigest() throws {
        let digest = SyncMessage.peersDigest([device, Data(repeating: 1, count: 32)])
        #expect(digest.count == 8)
        // The digest is of the set: order does not matter.
        #expect(digest == SyncMessage.peersDigest([Data(repeating: 1, count: 32), device]))
        let stores = [SyncMessage.Hello.Store(identifier: "s", vectorDigest: SyncMessage.vectorDigest(VersionVector()), peersDigest: digest)]
        let hello = SyncMessage.Hello(protocolVersion: 3, account: "ab", device: device, stores: stores,
                                      signature: Data(repeating: 3, count: 64))
        #expect(try SyncMessage(decoding: SyncMessage.hello(hello).encoded()) == .hello(hello))
        // Protocol 2's hello: one store and a vector, no list. It reads, so the version is what is reported.
        let old: PropertyListValue = ["type": "hello", "protocol": 2, "account": "ab", "store": "s", "device": .data(device),
                                      "vector": .dictionary([:]), "signature": .data(Data(repeating: 3, count: 64))]
        guard case .hello(let older) = try SyncMessage(propertyList: old) else { Issue.record("not a hello"); return }
        #expect(older.protocolVersion == 2)
        #expect(older.stores.isEmpty)
    }

    @Test("A hello of more than 1,024 stores, or naming one twice, is refused")
    func helloStoreCap() throws {
        func hello(_ names: [String]) -> SyncMessage {
            .hello(.init(protocolVersion: 3, account: "ab", device: device,
                         stores: names.map { .init(identifier: $0, vectorDigest: Data(count: 8), peersDigest: Data(count: 8)) },
                         signature: Data(count: 64)))
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
        let mixed: PropertyListValue = ["type": "store", "store": "s", "peers": [.data(device), .data(Data([1, 2])), "text"]]
        #expect(try SyncMessage(propertyList: mixed) == .store(.init(store: "s", peers: [device])))
        #expect(throws: SyncProtocolError.self) { try SyncMessage(propertyList: ["type": "store"]) }
        #expect(throws: SyncProtocolError.self) { try SyncMessage(propertyList: ["type": "delta", "entries": [], "certificates": [], "vector": .dictionary([:])]) }
    }
}
