import Foundation
import Hearth
import Testing

/// Every element of Apple's class reference (seed 003), used as Apple's sample code uses it.
@Suite("Apple's API")
struct AppleAPITests {
    @Test("Apple's names compile and have Apple's values")
    func namesAndConstants() {
        let _: NSUbiquitousKeyValueStore.Type = UbiquitousKeyValueStore.self
        #expect(NSUbiquitousKeyValueStoreServerChange == 0)
        #expect(NSUbiquitousKeyValueStoreInitialSyncChange == 1)
        #expect(NSUbiquitousKeyValueStoreQuotaViolationChange == 2)
        #expect(NSUbiquitousKeyValueStoreAccountChange == 3)
        #expect(ChangeReason.allCases.map(\.rawValue) == [0, 1, 2, 3])
        #expect(NSUbiquitousKeyValueStoreChangeReasonKey == "NSUbiquitousKeyValueStoreChangeReasonKey")
        #expect(NSUbiquitousKeyValueStoreChangedKeysKey == "NSUbiquitousKeyValueStoreChangedKeysKey")
        #expect(NSUbiquitousKeyValueStore.didChangeExternallyNotification == NSUbiquitousKeyValueStoreDidChangeExternallyNotification)
        #expect(NSUbiquitousKeyValueStore.didChangeExternallyNotification.rawValue == "NSUbiquitousKeyValueStoreDidChangeExternallyNotification")
    }

    @Test("The default store exists, is shared, and takes its identifier from the environment")
    func defaultStore() {
        #expect(NSUbiquitousKeyValueStore.default === UbiquitousKeyValueStore.default)
        #expect(!UbiquitousKeyValueStore.default.storeIdentifier.isEmpty)
    }

    @Test("Every setter and getter, with the brief's sample")
    func settersAndGetters() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        let store: NSUbiquitousKeyValueStore = t.store

        store.set(2, forKey: "backgroundColor")                 // set(_: Any?, forKey:) with a literal
        #expect(store.longLong(forKey: "backgroundColor") == 2)
        #expect(store.object(forKey: "backgroundColor") as? Int == 2)

        store.set("text" as String?, forKey: "s")
        #expect(store.string(forKey: "s") == "text")
        store.set(Data([1, 2, 3]) as Data?, forKey: "d")
        #expect(store.data(forKey: "d") == Data([1, 2, 3]))
        store.set([1, "two", 3.5] as [Any]?, forKey: "a")
        let array = try #require(store.array(forKey: "a"))
        #expect(array.count == 3 && array[1] as? String == "two" && array[2] as? Double == 3.5)
        store.set(["x": 1, "y": true] as [String: Any]?, forKey: "dict")
        let dict = try #require(store.dictionary(forKey: "dict"))
        #expect(dict["x"] as? Int == 1 && dict["y"] as? Bool == true)
        store.set(Int64(-9_000_000_000), forKey: "ll")
        #expect(store.longLong(forKey: "ll") == -9_000_000_000)
        store.set(2.75, forKey: "dbl")
        #expect(store.double(forKey: "dbl") == 2.75)
        store.set(true, forKey: "flag")
        #expect(store.bool(forKey: "flag"))
        let date = Date(timeIntervalSinceReferenceDate: 700_000_000.5)
        store.set(date, forKey: "when")
        #expect(store.object(forKey: "when") as? Date == date)

        let all = store.dictionaryRepresentation
        #expect(Set(all.keys) == ["backgroundColor", "s", "d", "a", "dict", "ll", "dbl", "flag", "when"])
        #expect(all["flag"] as? Bool == true)

        store.removeObject(forKey: "s")
        #expect(store.string(forKey: "s") == nil)
        #expect(store.object(forKey: "s") == nil)
        store.removeObject(forKey: "never-existed")              // does nothing
        #expect(store.dictionaryRepresentation.count == 8)
        #expect(store.synchronize())
    }

    @Test("Setting nil through any optional setter removes the key")
    func nilRemoves() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        let store = t.store
        for setter: (String) -> Void in [
            { store.set(nil as Any?, forKey: $0) }, { store.set(nil as String?, forKey: $0) },
            { store.set(nil as Data?, forKey: $0) }, { store.set(nil as [Any]?, forKey: $0) },
            { store.set(nil as [String: Any]?, forKey: $0) },
        ] {
            store.set("present", forKey: "k")
            setter("k")
            #expect(store.object(forKey: "k") == nil)
        }
    }

    @Test("A Bool comes back as a Bool and an integer as an integer")
    func boolIntegerRoundTrip() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        t.store.set(true, forKey: "b")
        t.store.set(Int64(1), forKey: "i")
        t.store.set(1.0, forKey: "d")
        #expect(t.store.value(forKey: "b") == .bool(true))
        #expect(t.store.value(forKey: "i") == .integer(1))
        #expect(t.store.value(forKey: "d") == .double(1.0))
        #expect(t.store.object(forKey: "b") as? Bool == true)
        #expect(t.store.object(forKey: "i") as? Int64 == 1)
        #expect(t.store.object(forKey: "d") as? Double == 1.0)
        t.store.set(NSNumber(value: false), forKey: "nb")
        #expect(t.store.value(forKey: "nb") == .bool(false))
    }

    @Test("Values that are not property lists are logged and ignored; the old value stays")
    func nonPropertyListIgnored() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        t.store.set("keep", forKey: "k")
        t.store.set(URL(fileURLWithPath: "/tmp"), forKey: "k")
        t.store.set(["ok": NSNull()] as [String: Any]?, forKey: "k")
        t.store.set([1, NSObject()] as [Any]?, forKey: "k")
        #expect(t.store.string(forKey: "k") == "keep")
        #expect(throws: KeyValueStoreError.self) { try t.store.setObject(NSNull(), forKey: "k") }
    }

    @Test("A dictionary is written whole or not at all")
    func dictionaryAtomicity() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        t.store.set(["a": 1] as [String: Any]?, forKey: "group")
        t.store.set(["a": 2, "b": Data(count: StoreLimits.maximumValueSize)] as [String: Any]?, forKey: "group")
        #expect(t.store.dictionary(forKey: "group")?.count == 1)
        #expect(t.store.dictionary(forKey: "group")?["a"] as? Int == 1)
    }

    @Test("Two instances on the same identifier share the data")
    func sharedInstances() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        let other = try UbiquitousKeyValueStore(storeIdentifier: t.identifier, configuration: .init(dataDirectory: t.directory))
        t.store.set("shared", forKey: "k")
        #expect(other.string(forKey: "k") == "shared")
    }

    @Test("synchronize() is false for a memory-only store (no identifier)")
    func synchronizeWithoutIdentifier() {
        let store = UbiquitousKeyValueStore(storeIdentifier: "")
        store.set("x", forKey: "k")
        #expect(store.string(forKey: "k") == "x")
        #expect(!store.synchronize())
        #expect(store.fileURL == nil)
    }
}
