import Foundation
import Hearth
import HearthCore
import HearthTestSupport
import HearthTesting
import Testing

/// Issue 11's data-loss points: no value the setters accept may destroy data, and Apple's
/// types and keys are kept exactly.
@Suite("No accepted value destroys data")
struct DataLossTests {
    /// `[[[…[1]…]]]`, `depth` arrays deep.
    static func nested(_ depth: Int) -> PropertyListValue {
        var value: PropertyListValue = 1
        for _ in 0..<depth { value = .array([value]) }
        return value
    }

    /// The same as Foundation objects.
    static func nestedObject(_ depth: Int) -> Any {
        var object: Any = 1
        for _ in 0..<depth { object = [object] }
        return object
    }

    /// Opens the store of `t` again from its file, as the next launch would.
    static func reopen(_ t: TemporaryStore, logger: LogCapture? = nil) async throws -> UbiquitousKeyValueStore {
        await t.store.internals.close()
        var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: t.directory, sync: .disabled)
        if let logger { configuration.logger = logger.logger("hearth") }
        return try UbiquitousKeyValueStore(storeIdentifier: t.identifier, configuration: configuration)
    }

    @Test("Point 1: a value nested 1,000 deep is refused by the setter, and every key survives the next launch")
    func deepValueRefused() async throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        t.store.set("kept", forKey: "other")
        #expect(throws: KeyValueStoreError.self) { try t.store.setValue(Self.nested(1000), forKey: "deep") }
        do {
            try t.store.setObject(Self.nestedObject(1000), forKey: "deep")
            Issue.record("a 1,000-deep object was accepted")
        } catch {
            #expect(error.code == .tooDeep)
        }
        // Apple's setter logs and ignores it, and posts nothing.
        t.store.set(Self.nestedObject(1000), forKey: "deep")
        #expect(t.store.object(forKey: "deep") == nil)
        // The limit itself is accepted, one more is not.
        try t.store.setValue(Self.nested(StoreLimits.maximumNestingDepth), forKey: "limit")
        #expect(throws: KeyValueStoreError.self) { try t.store.setValue(Self.nested(StoreLimits.maximumNestingDepth + 1), forKey: "over") }
        #expect(t.store.synchronize())

        let reopened = try await Self.reopen(t)
        #expect(reopened.string(forKey: "other") == "kept")
        #expect(reopened.value(forKey: "limit") == Self.nested(StoreLimits.maximumNestingDepth))
        #expect(reopened.value(forKey: "over") == nil)
        await reopened.internals.close()
    }

    @Test("Point 1: a store file with one entry 300 deep loads every other entry and keeps the file byte for byte")
    func plantedDeepEntry() async throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        for key in ["a", "b", "c"] { t.store.set(key.uppercased(), forKey: key) }
        #expect(t.store.synchronize())
        await t.store.internals.close()
        // Plant the entry with Python's plistlib, as a tool or an older build might write it.
        let path = t.location.filePath
        let planted = try await PlantedEntry.plantDeep(300, into: path)
        #expect(planted.status == 0, "\(planted.error)")
        let plantedBytes = try Data(contentsOf: URL(fileURLWithPath: path))

        let capture = LogCapture()
        let store = try await Self.reopen(t, logger: capture)
        #expect(store.values == ["a": "A", "b": "B", "c": "C"])
        let record = await capture.waitFor("could not be loaded")
        #expect(record?.level == .error)
        #expect(record?.metadata["entries"]?.contains("\"deep\"") == true)
        let copy = try #require(record?.metadata["copy"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: copy)) == plantedBytes)
        // The store goes on: writes and the next launch work, the set-aside copy stays.
        try store.setValue("D", forKey: "d")
        #expect(store.synchronize())
        await store.internals.close()
        let again = try UbiquitousKeyValueStore(storeIdentifier: t.identifier, configuration: .init(dataDirectory: t.directory, sync: .disabled))
        #expect(again.values == ["a": "A", "b": "B", "c": "C", "d": "D"])
        #expect(FileManager.default.fileExists(atPath: copy))
        await again.internals.close()
    }

    @Test("Point 3: CGFloat and [CGFloat] are stored as doubles and read back as Apple's getters do")
    func cgFloat() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        t.store.set(CGFloat(12.5), forKey: "width")
        t.store.set([CGFloat(1.5), CGFloat(-2)], forKey: "position")
        t.store.set(["scale": CGFloat(0.75)], forKey: "view")
        try t.store.setObject(CGFloat(3), forKey: "native")
        #expect(t.store.value(forKey: "width") == .double(12.5))
        #expect(t.store.double(forKey: "width") == 12.5)
        #expect(t.store.longLong(forKey: "width") == 12)
        #expect((t.store.object(forKey: "width") as? NSNumber)?.doubleValue == 12.5)
        #expect((t.store.array(forKey: "position") as? [Double]) == [1.5, -2])
        #expect(t.store.value(forKey: "position") == [1.5, -2.0])
        #expect(t.store.value(forKey: "view") == ["scale": 0.75])
        #expect(t.store.value(forKey: "native") == .double(3))
    }

    @Test("Point 4: keys that differ only in Unicode normalisation are two keys, in memory and in the file")
    func exactKeys() async throws {
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        #expect(composed == decomposed)        // Swift's String says one key; Apple's store says two
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        t.store.set("composed", forKey: composed)
        t.store.set("decomposed", forKey: decomposed)
        #expect(t.store.keys.map { Array($0.utf8) } == [Array(decomposed.utf8), Array(composed.utf8)])   // UTF-8 order
        #expect(t.store.string(forKey: composed) == "composed")
        #expect(t.store.string(forKey: decomposed) == "decomposed")
        t.store.removeObject(forKey: decomposed)
        #expect(t.store.string(forKey: composed) == "composed")
        #expect(t.store.string(forKey: decomposed) == nil)
        t.store.set("again", forKey: decomposed)
        #expect(t.store.synchronize())

        let reopened = try await Self.reopen(t)
        #expect(reopened.string(forKey: composed) == "composed")
        #expect(reopened.string(forKey: decomposed) == "again")
        #expect(Set(reopened.keys.map { Array($0.utf8) }) == [Array(composed.utf8), Array(decomposed.utf8)])
        // Python sees both keys in the file, each spelt as written.
        let listed = try await ChildProcess.run("/usr/bin/env", ["python3", "-c",
            "import plistlib,sys; d=plistlib.load(open(sys.argv[1],'rb')); print(sorted(e['key'].encode().hex() for e in d['entries']))",
            t.location.filePath])
        #expect(listed.output == "['63616665cc81', '636166c3a9']\n")
        await reopened.internals.close()
    }
}
