import Foundation
import Hearth
import HearthCore
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
        t.store.internals.applyExternal([peer.write(3, forKey: "backgroundColor"), peer.write("x", forKey: "unmirrored"),
                               peer.write("here", forKey: "gone")])
        let defaults = try #require(UserDefaults(suiteName: suite))
        // Both keys: the mirror copies them one by one, so one may land before the other.
        #expect(await copied(by: mirror) { defaults.integer(forKey: "backgroundColor") == 3 && defaults.string(forKey: "gone") == "here" })
        #expect(defaults.object(forKey: "unmirrored") == nil)
        t.store.internals.applyExternal([peer.write(nil, forKey: "gone")])
        #expect(await copied(by: mirror) { defaults.object(forKey: "gone") == nil })
        mirror.stop()
    }

    /// Whether `condition` holds, checked now and after each batch `mirror` copies; the deadline
    /// only bounds a failure (generous: under ThreadSanitizer beside CPU hogs a copy can take
    /// seconds), and seen to hold only at it counts as not: no signal announced the copy.
    func copied(by mirror: UserDefaultsMirror, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        return await ChangeSignal.waitUntil(deadline, observing: { [mirror.copied] }) { condition() && ContinuousClock.now < deadline }
    }
}
