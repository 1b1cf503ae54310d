import Foundation
import Hearth
import Testing

/// Seed 003: getters return nil, 0 or false when the key is absent or its value is of another type.
@Suite("Getters and type mismatches")
struct GetterTests {
    static let values: [(String, PropertyListValue)] = [
        ("string", "text"), ("integer", 7), ("double", 2.5), ("boolTrue", true), ("boolFalse", false),
        ("date", .date(Date(timeIntervalSinceReferenceDate: 1))), ("data", .data(Data([1]))),
        ("array", [1]), ("dictionary", ["a": 1]),
    ]

    func store() throws -> TemporaryStore {
        let t = try TemporaryStore()
        for (key, value) in Self.values { try t.store.setValue(value, forKey: key) }
        return t
    }

    @Test("Absent keys: nil, 0 and false")
    func absent() throws {
        let t = try store()
        defer { t.cleanUp() }
        let s = t.store
        #expect(s.object(forKey: "absent") == nil)
        #expect(s.string(forKey: "absent") == nil)
        #expect(s.array(forKey: "absent") == nil)
        #expect(s.dictionary(forKey: "absent") == nil)
        #expect(s.data(forKey: "absent") == nil)
        #expect(s.longLong(forKey: "absent") == 0)
        #expect(s.double(forKey: "absent") == 0)
        #expect(s.bool(forKey: "absent") == false)
        #expect(s.value(forKey: "absent") == nil)
    }

    @Test("Object getters return nil for every other type")
    func objectGetters() throws {
        let t = try store()
        defer { t.cleanUp() }
        let s = t.store
        for (key, _) in Self.values {
            #expect((s.string(forKey: key) != nil) == (key == "string"), "string(forKey: \(key))")
            #expect((s.array(forKey: key) != nil) == (key == "array"), "array(forKey: \(key))")
            #expect((s.dictionary(forKey: key) != nil) == (key == "dictionary"), "dictionary(forKey: \(key))")
            #expect((s.data(forKey: key) != nil) == (key == "data"), "data(forKey: \(key))")
            #expect(s.object(forKey: key) != nil)
        }
    }

    @Test("Numeric getters convert between numbers as NSNumber does and return 0 / false for the rest")
    func numericGetters() throws {
        let t = try store()
        defer { t.cleanUp() }
        let s = t.store
        let expectations: [String: (Int64, Double, Bool)] = [
            "integer": (7, 7.0, true), "double": (2, 2.5, true), "boolTrue": (1, 1.0, true), "boolFalse": (0, 0, false),
            "string": (0, 0, false), "date": (0, 0, false), "data": (0, 0, false), "array": (0, 0, false), "dictionary": (0, 0, false),
        ]
        for (key, (ll, d, b)) in expectations {
            #expect(s.longLong(forKey: key) == ll, "longLong(forKey: \(key))")
            #expect(s.double(forKey: key) == d, "double(forKey: \(key))")
            #expect(s.bool(forKey: key) == b, "bool(forKey: \(key))")
        }
    }

    @Test("longLong clamps doubles outside Int64 instead of trapping")
    func clamping() throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        t.store.set(1e300, forKey: "big")
        t.store.set(-1e300, forKey: "small")
        t.store.set(Double.nan, forKey: "nan")
        #expect(t.store.longLong(forKey: "big") == .max)
        #expect(t.store.longLong(forKey: "small") == .min)
        #expect(t.store.longLong(forKey: "nan") == 0)
    }
}
