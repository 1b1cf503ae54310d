import Foundation
import Hearth
import Testing

/// Seed 002's pattern: external changes are copied into the local defaults database.
@Suite("UserDefaults mirror")
struct UserDefaultsMirrorTests {
    @Test("External changes are copied into the defaults suite, removals too; own writes are not")
    func mirrors() async throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        let suite = "hearth-mirror-\(UUID())"
        defer { UserDefaults.standard.removePersistentDomain(forName: suite) }
        let mirror = UserDefaultsMirror(store: t.store, suiteName: suite, keys: ["backgroundColor", "gone"])
        t.store.set(Int64(1), forKey: "backgroundColor")            // own write: not mirrored
        var peer = FakePeer()
        t.store.applyExternal([peer.write(3, forKey: "backgroundColor"), peer.write("x", forKey: "unmirrored"),
                               peer.write("here", forKey: "gone")])
        let defaults = try #require(UserDefaults(suiteName: suite))
        // Both keys: the mirror copies them one by one, so one may land before the other.
        try await waitUntil { defaults.integer(forKey: "backgroundColor") == 3 && defaults.string(forKey: "gone") == "here" }
        #expect(defaults.object(forKey: "unmirrored") == nil)
        t.store.applyExternal([peer.write(nil, forKey: "gone")])
        try await waitUntil { defaults.object(forKey: "gone") == nil }
        mirror.stop()
    }

    func waitUntil(_ condition: () -> Bool) async throws {
        // Generous: under ThreadSanitizer beside CPU hogs a copy can take seconds.
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else { Issue.record("timed out"); return }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
