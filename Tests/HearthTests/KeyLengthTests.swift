import Foundation
import Hearth
import Testing

/// Seed 000: keys are at most 64 bytes of UTF-8.
@Suite("Key length")
struct KeyLengthTests {
    @Test("64 bytes are accepted, 65 refused, counted in UTF-8 bytes", arguments: [
        (String(repeating: "a", count: 64), true),
        (String(repeating: "a", count: 65), false),
        (String(repeating: "é", count: 32), true),       // 2 bytes each: 64
        (String(repeating: "é", count: 33), false),      // 66 bytes, 33 characters
        (String(repeating: "🏠", count: 16), true),      // 4 bytes each: 64
        (String(repeating: "🏠", count: 16) + "a", false),
        (String(repeating: "a", count: 62) + "€", false), // 62 + 3 = 65
    ])
    func limit(key: String, accepted: Bool) throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        // Throwing API: throws keyTooLong.
        do {
            try t.store.setValue("v", forKey: key)
            #expect(accepted)
        } catch {
            #expect(!accepted)
            #expect(error.code == .keyTooLong)
            #expect(error.key == key)
        }
        // Apple's API: logs and ignores.
        t.store.set("apple", forKey: key)
        #expect(t.store.string(forKey: key) == (accepted ? "apple" : nil))
        #expect(t.store.dictionaryRepresentation.count == (accepted ? 1 : 0))
    }

    @Test("A too-long key does not post a quota notification")
    func noNotification() async throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        let recorder = ChangeRecorder(t.store, count: 1)
        t.store.set("v", forKey: String(repeating: "k", count: 65))
        #expect(await recorder.events(timeout: .milliseconds(300)).isEmpty)
    }
}
