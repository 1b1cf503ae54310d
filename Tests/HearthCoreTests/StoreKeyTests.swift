import HearthCore
import Testing

@Suite("Store keys as String keys")
struct StoreKeyTests {
    @Test("Of two keys that are one String, a [String: …] keeps the one last in UTF-8 order, its spelling and value, whatever the dictionary's order")
    func collidingKeysKeepTheLastInUTF8Order() {
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"   // UTF-8 63 61 66 C3 A9 > 63 61 66 65 CC 81
        // Many dictionaries, so that both iteration orders of the pair occur among them.
        for extra in 0..<32 {
            var keyed: [StoreKey: Int] = [StoreKey(composed): 1, StoreKey(decomposed): 2]
            for i in 0..<extra { keyed[StoreKey("k\(i)")] = 100 + i }
            let byString = keyed.keyedByString
            #expect(byString.count == extra + 1)
            #expect(byString[composed] == 1)
            #expect(byString.keys.contains { Array($0.utf8) == Array(composed.utf8) }, "the kept key is spelled as written")
        }
    }
}
