import HearthCore
import Testing

@Suite("StampHistory: the superseded stamps of a key")
struct StampHistoryTests {
    /// Where the key's stamps are in memory (0 for none), read without keeping a reference: one
    /// held here would make the next write copy the buffer whatever `note` does.
    static func bufferAddress(_ history: StampHistory, _ key: StoreKey) -> UInt {
        history.superseded[key]?.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } ?? 0
    }

    @Test("Stamps stay ascending without repeats; past the bound the lower of the two closest goes")
    func ordering() {
        var history = StampHistory()
        for raw: UInt64 in [50, 10, 30, 10, 30] { history.note(HLCTimestamp(rawValue: raw), forKey: "k") }
        #expect(history.superseded["k"]?.map(\.rawValue) == [10, 30, 50])
        // 11 is 1 from 10, the closest pair: 10 goes.
        for raw: UInt64 in [100, 200, 300, 400, 500, 11] { history.note(HLCTimestamp(rawValue: raw), forKey: "k") }
        #expect(history.superseded["k"]?.count == StampHistory.maximumPerKey)
        #expect(history.superseded["k"]?.map(\.rawValue) == [11, 30, 50, 100, 200, 300, 400, 500])
        #expect(history.superseded["other"] == nil, "a key never noted has no stamps")
    }

    @Test("A note with room left in the key's array writes into it: the key's stamps are not copied on every merge")
    func noteInPlace() {
        var history = StampHistory()
        var inPlace = 0
        for raw in 1...UInt64(StampHistory.maximumPerKey + 4) {
            let key: StoreKey = "k"
            let room = (history.superseded[key]?.capacity ?? 0) > (history.superseded[key]?.count ?? 0)
            let before = Self.bufferAddress(history, key)
            history.note(HLCTimestamp(rawValue: raw * 10), forKey: key)
            guard room else { continue }
            #expect(Self.bufferAddress(history, key) == before, "stamp \(raw * 10): the array was copied")
            inPlace += 1
        }
        // The array grows by doubling, so most notes find room: the check above did run.
        #expect(inPlace >= 4)
        #expect(history.superseded["k"]?.count == StampHistory.maximumPerKey)
    }
}
