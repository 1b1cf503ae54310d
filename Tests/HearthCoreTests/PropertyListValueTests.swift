import Foundation
import HearthCore
import Testing

@Suite("PropertyListValue and Foundation objects")
struct PropertyListValueTests {
    @Test("Booleans stay Booleans and integers stay integers, in both directions")
    func boolAndIntegerAreDistinct() throws {
        #expect(try PropertyListValue(foundation: true) == .bool(true))
        #expect(try PropertyListValue(foundation: 1) == .integer(1))
        #expect(try PropertyListValue(foundation: NSNumber(value: true)) == .bool(true))
        #expect(try PropertyListValue(foundation: NSNumber(value: false)) == .bool(false))
        #expect(try PropertyListValue(foundation: NSNumber(value: 1)) == .integer(1))
        #expect(try PropertyListValue(foundation: NSNumber(value: 0)) == .integer(0))
        #expect(try PropertyListValue(foundation: NSNumber(value: Int8(1))) == .integer(1))
        #expect(try PropertyListValue(foundation: NSNumber(value: 1.0)) == .double(1.0))
        #expect(try PropertyListValue(foundation: 1.0) == .double(1.0))
        #expect(PropertyListValue.bool(true) != .integer(1))

        let back = PropertyListValue.bool(true).foundationObject
        #expect(back as? Bool == true)
        #expect(try PropertyListValue(foundation: back) == .bool(true))
        let int = PropertyListValue.integer(1).foundationObject
        #expect(try PropertyListValue(foundation: int) == .integer(1))
        #expect(int as? Int == 1)
        #expect(int as? Int64 == 1)
    }

    @Test("Every integer width converts; unsigned values beyond Int64 are refused")
    func integerWidths() throws {
        let inputs: [Any] = [Int8(-8), Int16(-16), Int32(-32), Int64(-64), Int(-1), UInt8(8), UInt16(16), UInt32(32), UInt64(64), UInt(1)]
        let expected: [Int64] = [-8, -16, -32, -64, -1, 8, 16, 32, 64, 1]
        for (input, value) in zip(inputs, expected) {
            #expect(try PropertyListValue(foundation: input) == .integer(value))
        }
        #expect(throws: NotAPropertyListError.self) { try PropertyListValue(foundation: UInt64.max) }
        #expect(try PropertyListValue(foundation: Int64.max) == .integer(.max))
        #expect(try PropertyListValue(foundation: Int64.min) == .integer(.min))
        #expect(try PropertyListValue(foundation: Float(1.5)) == .double(1.5))
    }

    @Test("Nested collections convert exactly and keep String keys")
    func nested() throws {
        let date = Date(timeIntervalSinceReferenceDate: 12345.5)
        let object: [String: Any] = [
            "name": "Ada", "age": 36, "admin": true, "ratio": 0.5, "born": date,
            "blob": Data([0, 1, 2]), "tags": ["a", 1, false, ["deep": [1, 2]]],
        ]
        let value = try PropertyListValue(foundation: object)
        let expected: PropertyListValue = [
            "name": "Ada", "age": 36, "admin": true, "ratio": 0.5, "born": .date(date),
            "blob": .data(Data([0, 1, 2])), "tags": ["a", 1, false, ["deep": [1, 2]]],
        ]
        #expect(value == expected)
        let back = value.foundationObject as? [String: Any]
        #expect(back != nil)
        #expect(try PropertyListValue(foundation: back as Any) == expected)
        #expect((back?["tags"] as? [Any])?.count == 4)
        #expect(((back?["tags"] as? [Any])?[3] as? [String: Any])?["deep"] != nil)
    }

    @Test("Foundation class instances convert")
    func foundationClasses() throws {
        #expect(try PropertyListValue(foundation: NSString(string: "x")) == .string("x"))
        #expect(try PropertyListValue(foundation: NSData(data: Data([9]))) == .data(Data([9])))
        #expect(try PropertyListValue(foundation: NSDate(timeIntervalSinceReferenceDate: 5)) == .date(Date(timeIntervalSinceReferenceDate: 5)))
        #expect(try PropertyListValue(foundation: NSArray(array: [1, "a"])) == [1, "a"])
        #expect(try PropertyListValue(foundation: NSDictionary(dictionary: ["k": true])) == ["k": true])
    }

    @Test("Non-property-list objects are refused with the path to the culprit")
    func refusals() {
        struct Custom {}
        #expect(throws: NotAPropertyListError.self) { try PropertyListValue(foundation: Custom()) }
        #expect(throws: NotAPropertyListError.self) { try PropertyListValue(foundation: NSNull()) }
        #expect(throws: NotAPropertyListError.self) { try PropertyListValue(foundation: URL(fileURLWithPath: "/")) }
        do {
            _ = try PropertyListValue(foundation: ["list": [1, 2, Custom()]] as [String: Any])
            Issue.record("expected a refusal")
        } catch {
            #expect(error.path == "root[\"list\"][2]")
        }
        #expect(throws: NotAPropertyListError.self) {
            try PropertyListValue(foundation: NSDictionary(dictionary: [1: "non-string key"]))
        }
        let missing: String? = nil
        #expect(throws: NotAPropertyListError.self) { try PropertyListValue(foundation: [missing as Any]) }
    }

    @Test("Equality is by bit pattern for doubles, so replicas compare exactly")
    func doubleEquality() {
        #expect(PropertyListValue.double(.nan) == .double(.nan))
        #expect(PropertyListValue.double(0.0) != .double(-0.0))
        #expect(Set<PropertyListValue>([.double(0.0), .double(-0.0), .integer(0), .bool(false)]).count == 4)
    }
}
