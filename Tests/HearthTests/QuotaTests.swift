import Foundation
import Hearth
import Testing

/// Seed 000: 1 MB per value, 1 MB in all, 1024 keys; a write over a quota fails whole,
/// changes nothing, and posts quotaViolationChange (Apple's setters) or throws (ours).
/// An entry costs its key's UTF-8 bytes plus its value's canonical size (data: 5 + bytes).
@Suite("Quotas")
struct QuotaTests {
    static let perValue = StoreLimits.maximumValueSize
    static let total = StoreLimits.maximumTotalSize

    @Test("Per-value limit: exactly at the limit is accepted, one byte over refused")
    func perValueLimit() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        let exact = Data(count: Self.perValue - 1 - 5)
        try t.store.setValue(.data(exact), forKey: "k")
        #expect(t.store.usage.bytes == Self.perValue)
        try t.store.removeValue(forKey: "k")
        #expect(throws: KeyValueStoreError.self) { try t.store.setValue(.data(exact + [0]), forKey: "k") }
        do { try t.store.setValue(.data(exact + [0]), forKey: "k") } catch { #expect(error.code == .valueTooLarge) }
        #expect(t.store.data(forKey: "k") == nil)
    }

    @Test("Total limit: filling to exactly 1 MB works; one byte more is refused and changes nothing")
    func totalLimit() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        try t.store.setValue(.data(Data(count: 600_000 - 6)), forKey: "a")
        let rest = Self.total - 600_000
        do {
            try t.store.setValue(.data(Data(count: rest - 6 + 1)), forKey: "b")
            Issue.record("accepted a write over the total")
        } catch {
            #expect(error.code == .storeFull)
        }
        #expect(t.store.object(forKey: "b") == nil)
        try t.store.setValue(.data(Data(count: rest - 6)), forKey: "b")
        #expect(t.store.usage.bytes == Self.total)
        // Replacing a value by a smaller one, or deleting, is always possible in a full store.
        try t.store.setValue(.data(Data(count: 10)), forKey: "b")
        try t.store.removeValue(forKey: "a")
        #expect(t.store.usage.bytes == 1 + 15)
    }

    @Test("Key count: 1024 keys are accepted, a 1025th is refused; tombstones do not count")
    func keyCount() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        for i in 0..<StoreLimits.maximumKeyCount { try t.store.setValue(true, forKey: "k\(i)") }
        #expect(t.store.usage.keys == 1024)
        do {
            try t.store.setValue(true, forKey: "one-too-many")
            Issue.record("accepted a 1025th key")
        } catch {
            #expect(error.code == .tooManyKeys)
        }
        try t.store.setValue(false, forKey: "k0")               // overwriting is fine
        try t.store.removeValue(forKey: "k1")                   // leaves a tombstone
        try t.store.setValue(true, forKey: "one-too-many")      // which does not count
        #expect(t.store.usage.keys == 1024)
        #expect(t.store.internals.replica.entries.count == 1025)
    }

    @Test("Apple's setters: a quota violation changes nothing and posts quotaViolationChange with the key")
    func appleSetterPostsNotification() async throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        t.store.set("before", forKey: "big")
        let recorder = ChangeRecorder(t.store, count: 1)
        let notified = NotificationProbe(store: t.store)
        t.store.set(Data(count: Self.perValue), forKey: "big")
        let events = await recorder.events()
        #expect(events == [ChangeEvent(reason: .quotaViolationChange, keys: ["big"])])
        #expect(t.store.string(forKey: "big") == "before")
        let note = try #require(await notified.first())
        #expect(note.reason == NSUbiquitousKeyValueStoreQuotaViolationChange)
        #expect(note.keys == ["big"])
    }

    @Test("The throwing setter throws instead of posting")
    func throwingSetterDoesNotPost() async throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        let recorder = ChangeRecorder(t.store, count: 1)
        #expect(throws: KeyValueStoreError.self) { try t.store.setValue(.data(Data(count: Self.perValue)), forKey: "big") }
        #expect(await recorder.events(timeout: .milliseconds(300)).isEmpty)
    }

    @Test("Sizes follow the documented rule")
    func sizeRule() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        try t.store.setValue("héllo", forKey: "ké")     // key 3 bytes; string 5 + 6
        try t.store.setValue(42, forKey: "n")           // 1 + 9
        try t.store.setValue(true, forKey: "b")         // 1 + 1
        try t.store.setValue(["x": 1], forKey: "d")     // 1 + 5 + (4 + 1 + 9)
        #expect(t.store.usage == StoreUsage(bytes: 14 + 10 + 2 + 20, keys: 4))
    }
}
