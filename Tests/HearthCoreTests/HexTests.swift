import Foundation
import HearthCore
import Testing

@Suite("Hex")
struct HexTests {
    @Test("Every byte encodes as two lower-case digits, from contiguous storage or any sequence, and decodes back")
    func roundTrip() {
        let all = (0...255).map { UInt8($0) }
        let expected = all.map { String(format: "%02x", $0) }.joined()
        #expect(Hex.encode(all) == expected)
        #expect(Hex.encode(Data(all)) == expected)
        #expect(Hex.encode(all.lazy.map { $0 }) == expected, "a sequence with no contiguous storage")
        #expect(Hex.encode([UInt8]()) == "")
        #expect(Hex.decode(expected) == all && Hex.decode(expected.uppercased()) == all)
    }
}
