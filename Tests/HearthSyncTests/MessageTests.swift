import Foundation
import HearthCore
import HearthSync
import Testing

@Suite("Sync messages")
struct MessageTests {
    let device = Data(repeating: 7, count: 32)

    @Test("A hello round-trips with its peers digest; a hello of an earlier build (none) reads as empty")
    func helloDigest() throws {
        let digest = SyncMessage.peersDigest([device, Data(repeating: 1, count: 32)])
        #expect(digest.count == 8)
        // The digest is of the set: order does not matter.
        #expect(digest == SyncMessage.peersDigest([Data(repeating: 1, count: 32), device]))
        let hello = SyncMessage.Hello(protocolVersion: 1, account: "ab", store: "s", device: device,
                                      vector: VersionVector(), signature: Data(repeating: 3, count: 64), peersDigest: digest)
        #expect(try SyncMessage(decoding: SyncMessage.hello(hello).encoded()) == .hello(hello))
        var fields = SyncMessage.hello(hello).propertyList.dictionaryValue!
        fields["peersDigest"] = nil
        guard case .hello(let old) = try SyncMessage(propertyList: .dictionary(fields)) else { Issue.record("not a hello"); return }
        #expect(old.peersDigest.isEmpty)
    }

    @Test("A peers message keeps device IDs only, and at most 64 of them")
    func peersMessage() throws {
        let ids = (0..<100).map { Data(repeating: UInt8($0), count: 32) }
        #expect(try SyncMessage(decoding: SyncMessage.peers(Array(ids.prefix(3))).encoded()) == .peers(Array(ids.prefix(3))))
        guard case .peers(let capped) = try SyncMessage(decoding: SyncMessage.peers(ids).encoded()) else { Issue.record("not peers"); return }
        #expect(capped == Array(ids.prefix(SyncMessage.maximumPeers)))
        let mixed: PropertyListValue = ["type": "peers", "devices": [.data(device), .data(Data([1, 2])), "text"]]
        #expect(try SyncMessage(propertyList: mixed) == .peers([device]))
        #expect(throws: SyncProtocolError.self) { try SyncMessage(propertyList: ["type": "peers"]) }
    }
}
