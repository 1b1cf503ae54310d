import Foundation
import HearthCore
import HearthIdentity
import Testing

/// The canonical-encoding examples of docs/protocol.md, so the document cannot drift
/// from the code that signs.
@Suite("Canonical encoding vectors (docs/protocol.md)")
struct CanonicalVectorTests {
    static let values: [(PropertyListValue, String)] = [
        (.string("blue"), "0100000004626c7565"),
        (.integer(-2), "02fffffffffffffffe"),
        (.double(1.5), "033ff8000000000000"),
        (.bool(false), "04"),
        (.bool(true), "05"),
        (.date(Date(timeIntervalSinceReferenceDate: 0)), "060000000000000000"),
        (.data(Data([0xde, 0xad])), "0700000002dead"),
        (.array([.integer(1), .string("a")]), "0800000002" + "020000000000000001" + "010000000161"),
        (.dictionary(["b": .integer(1), "a": .bool(true)]), "0900000002" + "0000000161" + "05" + "0000000162" + "020000000000000001"),
    ]

    @Test("Value encodings match the documented bytes")
    func valueVectors() {
        for (value, hex) in Self.values {
            #expect(Hex.encode(CanonicalEncoding.encode(value)) == hex, "\(value)")
        }
    }

    @Test("A tombstone's signing bytes and signature match the documented vector")
    func tombstone() throws {
        var entry = SignatureTests.entry
        entry.value = nil
        entry.sequence = 43
        let bytes = entry.signingBytes(storeIdentifier: SignatureTests.storeIdentifier)
        let expected = [
            "6865617274682d656e7472792d763100",
            "00000011", "636f6d2e6578616d706c652e6e6f746573",
            "0000000f", "6261636b67726f756e64436f6c6f72",
            "00",  // tombstone
            "018bcfe568000001",
            "00112233445566778899aabbccddeeff",
            "000000000000002b",
        ].joined()
        #expect(Hex.encode(bytes) == expected)
        let signature = try SignatureTests.fixedKey().signature(for: bytes)
        #expect(Hex.encode(signature) == Self.tombstoneSignature)
    }

    static let tombstoneSignature =
        "070c130f10bdcb93c8d9826cce367494aad68897fa21cb51d9cbc195dd716018"
        + "4b02b13f075eb15bf5ad3886369fc5db53c5c082c70ecf29a700833ea1678405"
}
