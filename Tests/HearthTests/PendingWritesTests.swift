import Foundation
@testable import Hearth
import HearthCore
import Testing

/// An attached process's queue of writes the host has not saved yet (PendingWrites): what is
/// sent, what stays until durable, and that superseded writes leave it without a synchronize()
/// ever missing a write it waits for.
@Suite("Pending writes of an attached process")
struct PendingWritesTests {
    let origin = ReplicaID.random()
    var sequence: UInt64 = 0

    mutating func entry(_ key: StoreKey, _ value: Int64) -> Entry {
        sequence += 1
        return Entry(key: key, value: .integer(value), timestamp: HLCTimestamp(milliseconds: 1_000 + sequence, counter: 0),
                     origin: origin, sequence: sequence)
    }

    @Test("Writes of different keys are all kept, in order, and the unsent ones leave once")
    mutating func keepsOrder() {
        var pending = PendingWrites()
        for i in 0..<10 { pending.append(entry(StoreKey("k\(i)"), Int64(i)), attached: true) }
        #expect(pending.entries.map(\.key.string) == (0..<10).map { "k\($0)" })
        #expect(pending.takeUnsent().count == 10)
        #expect(pending.takeUnsent().isEmpty)
        pending.append(entry("k10", 10), attached: true)
        #expect(pending.takeUnsent().map(\.key) == ["k10"])
        #expect(pending.count == 11, "sent writes stay until the host saved them")
    }

    @Test("A write of the key written last replaces it; the replacement is sent even if the first was")
    mutating func replacesLast() {
        var pending = PendingWrites()
        pending.append(entry("slider", 1), attached: true)
        pending.append(entry("slider", 2), attached: true)
        #expect(pending.count == 1)
        #expect(pending.takeUnsent().map(\.value) == [.integer(2)])
        pending.append(entry("slider", 3), attached: true)
        #expect(pending.count == 1)
        #expect(pending.takeUnsent().map(\.value) == [.integer(3)], "the first was sent: the replacement must go too")
    }

    @Test("While a synchronize() waits, no write is replaced or dropped")
    mutating func synchronizeKeepsAll() {
        var pending = PendingWrites()
        pending.synchronizing = 1
        for i in 0..<3000 { pending.append(entry("slider", Int64(i)), attached: true) }
        #expect(pending.count == 3000)
        pending.synchronizing = 0
        for i in 0..<3000 { pending.append(entry("other", Int64(i)), attached: true) }
        #expect(pending.count < 3000, "compacted once no one waits")
        #expect(pending.entries.last?.value == .integer(2999))
    }

    @Test("Compaction keeps the last write of each key, in order, and counts the unsent right")
    mutating func compaction() {
        var pending = PendingWrites()
        // Interleaved keys, so that replacing the last one does not apply: only compaction does.
        for i in 0..<600 { pending.append(entry(StoreKey("k\(i % 3)"), Int64(i)), attached: true) }
        _ = pending.takeUnsent()
        for i in 600..<1200 { pending.append(entry(StoreKey("k\(i % 3)"), Int64(i)), attached: true) }
        #expect(pending.count < 1024)
        let kept = pending.entries
        #expect(Set(kept.map(\.key)).count == kept.count || pending.count > 3, "at least the last of each key")
        for k in 0..<3 {
            let last = kept.last { $0.key == StoreKey("k\(k)") }
            #expect(last?.value == .integer(Int64(1197 + k)))
        }
        #expect(zip(kept, kept.dropFirst()).allSatisfy { $0.sequence < $1.sequence }, "sequence order kept")
        let unsent = pending.takeUnsent()
        #expect(unsent.allSatisfy { $0.sequence > 600 }, "only writes made after the last flush are unsent")
        #expect(!unsent.isEmpty)
    }

    @Test("Durable writes leave from the front; a partial vector keeps the rest")
    mutating func durable() {
        var pending = PendingWrites()
        for i in 0..<5000 { pending.append(entry(StoreKey("k\(i)"), Int64(i)), attached: true) }
        _ = pending.takeUnsent()
        pending.removeDurable(VersionVector([origin: 4000]))
        #expect(pending.count == 1000)
        #expect(pending.entries.first?.sequence == 4001)
        pending.append(entry("new", 1), attached: true)
        #expect(pending.takeUnsent().map(\.key) == ["new"])
        pending.removeDurable(VersionVector([origin: sequence]))
        #expect(pending.isEmpty)
    }

    @Test("Writes of two origins (an account switch between them): each leaves when its origin is durable")
    mutating func twoOrigins() {
        var pending = PendingWrites()
        for i in 0..<3 { pending.append(entry(StoreKey("a\(i)"), Int64(i)), attached: true) }
        let other = ReplicaID.random()
        for i in 0..<3 {
            pending.append(Entry(key: StoreKey("b\(i)"), value: .integer(Int64(i)), timestamp: HLCTimestamp(milliseconds: 9_000, counter: UInt16(i)),
                                 origin: other, sequence: UInt64(i + 1)), attached: true)
        }
        pending.removeDurable(VersionVector([other: 3]))
        #expect(pending.entries.map(\.key) == ["a0", "a1", "a2"])
        pending.removeDurable(VersionVector([origin: 2]))
        #expect(pending.entries.map(\.key) == ["a2"])
    }

    @Test("A refused write leaves; the unsent count follows")
    mutating func refused() {
        var pending = PendingWrites()
        for i in 0..<4 { pending.append(entry(StoreKey("k\(i)"), Int64(i)), attached: true) }
        _ = pending.takeUnsent()
        pending.append(entry("k4", 4), attached: true)
        pending.append(entry("k5", 5), attached: true)
        pending.remove { $0.key == "k1" || $0.key == "k5" }
        #expect(pending.entries.map(\.key) == ["k0", "k2", "k3", "k4"])
        #expect(pending.takeUnsent().map(\.key) == ["k4"])
    }
}
