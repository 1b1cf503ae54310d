import Foundation
import Hearth
import HearthTestSupport
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
        // The mirror saves each batch (`synchronize()`): woken by its file being written, a
        // copy that never reaches the disk fails. Both keys: the mirror copies them one by one.
        let file = defaultsFile(ofSuite: suite)
        let name = (file as NSString).lastPathComponent
        await untilFilesChange([file], "both keys in the defaults", names: { $0 == name }) {
            defaults.integer(forKey: "backgroundColor") == 3 && defaults.string(forKey: "gone") == "here"
        }
        #expect(defaults.object(forKey: "unmirrored") == nil)
        t.store.applyExternal([peer.write(nil, forKey: "gone")])
        await untilFilesChange([file], "the removal in the defaults", names: { $0 == name }) { defaults.object(forKey: "gone") == nil }
        mirror.stop()
    }
}
