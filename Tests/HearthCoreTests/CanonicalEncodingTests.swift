import Foundation
import HearthCore
import Testing

@Suite("Canonical encoding")
struct CanonicalEncodingTests {
    @Test("canonicalSize is exactly the encoded length", arguments: BinaryPropertyListTests.samples)
    func sizeMatchesEncoding(_ value: PropertyListValue) {
        #expect(CanonicalEncoding.encode(value).count == value.canonicalSize)
    }

    @Test("Known bytes for each type")
    func knownBytes() {
        #expect(CanonicalEncoding.encode("hi") == [0x01, 0, 0, 0, 2, 0x68, 0x69])
        #expect(CanonicalEncoding.encode(-2) == [0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE])
        #expect(CanonicalEncoding.encode(1.0) == [0x03, 0x3F, 0xF0, 0, 0, 0, 0, 0, 0])
        #expect(CanonicalEncoding.encode(false) == [0x04])
        #expect(CanonicalEncoding.encode(true) == [0x05])
        #expect(CanonicalEncoding.encode(.date(Date(timeIntervalSinceReferenceDate: 1.0))) == [0x06, 0x3F, 0xF0, 0, 0, 0, 0, 0, 0])
        #expect(CanonicalEncoding.encode(.data(Data([7]))) == [0x07, 0, 0, 0, 1, 7])
        #expect(CanonicalEncoding.encode([true]) == [0x08, 0, 0, 0, 1, 0x05])
        #expect(CanonicalEncoding.encode(["b": true, "a": false]) == [0x09, 0, 0, 0, 2, 0, 0, 0, 1, 0x61, 0x04, 0, 0, 0, 1, 0x62, 0x05])
    }

    @Test("Dictionary keys are ordered by UTF-8 bytes, not by Swift's String order")
    func keyOrder() {
        // "Z" (0x5A) < "a" (0x61) < "é" (0xC3 0xA9) in UTF-8 byte order.
        let bytes = CanonicalEncoding.encode(["é": 1, "a": 2, "Z": 3])
        let keys = [bytes[9], bytes[9 + 1 + 9 + 4], bytes[9 + 1 + 9 + 4 + 1 + 9 + 4]]
        #expect(keys == [0x5A, 0x61, 0xC3])
    }

    @Test("Entry signing bytes cover every field")
    func entrySigningBytes() {
        let origin = ReplicaID(high: 1, low: 2)
        let entry = Entry(key: "k", value: "v", timestamp: HLCTimestamp(rawValue: 3), origin: origin, sequence: 4)
        let bytes = entry.signingBytes(storeIdentifier: "s")
        #expect(bytes.starts(with: Entry.signingDomain))
        var tombstone = entry
        tombstone.value = nil
        let variants = [
            { var e = entry; e.key = "K"; return e }(), { var e = entry; e.value = "w"; return e }(),
            { var e = entry; e.timestamp = HLCTimestamp(rawValue: 4); return e }(),
            { var e = entry; e.origin = ReplicaID(high: 1, low: 3); return e }(),
            { var e = entry; e.sequence = 5; return e }(), tombstone,
        ]
        for variant in variants { #expect(variant.signingBytes(storeIdentifier: "s") != bytes) }
        #expect(entry.signingBytes(storeIdentifier: "t") != bytes)
    }
}
