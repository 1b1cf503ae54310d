import Foundation
import HearthCore
import Testing

/// What the writer and the reader each promise beyond a round trip (`BinaryPropertyListWriter`,
/// `BinaryPropertyListReader`).
@Suite("Binary property lists: the writer's sharing, the reader's cycles")
struct BinaryPropertyListPartsTests {
    @Test("Equal scalars are written once, as Apple's writer does: an array of one string three times is two objects")
    func equalScalarsAreShared() throws {
        func objectCount(_ value: PropertyListValue) throws -> UInt64 {
            let bytes = [UInt8](try BinaryPropertyList.encode(value))
            // The trailer's last 32 bytes: 6 unused, 2 sizes, then the object count (8 bytes, big-endian).
            return bytes[(bytes.count - 24)..<(bytes.count - 16)].reduce(0) { $0 << 8 | UInt64($1) }
        }
        #expect(try objectCount(["x", "x", "x"]) == 2)
        #expect(try objectCount(["x", "y", "z"]) == 4)
        #expect(try objectCount(["a": 1, "b": 1]) == 4, "two keys, one shared 1, the dictionary")
    }

    @Test("An array or dictionary that contains itself is refused as a cycle, not only by the depth bound")
    func aCycleIsNamed() {
        let array = BinaryPropertyListTests.document(objects: [[0xA1, 0x00]])
        let dictionary = BinaryPropertyListTests.document(objects: [[0xD1, 0x01, 0x00], [0x51, 0x6B]])
        for document in [array, dictionary] {
            #expect { try BinaryPropertyList.decode(document) } throws: { error in
                (error as? PropertyListDecodingError)?.code == .cycle
            }
        }
    }
}
