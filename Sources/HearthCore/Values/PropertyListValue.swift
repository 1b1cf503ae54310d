import Foundation

/// A value the key-value store can hold: one of the property-list types.
///
/// The cases mirror Apple's property-list object types (`NSString`, `NSNumber`,
/// `NSDate`, `NSData`, `NSArray`, `NSDictionary`), with `NSNumber` split into its three
/// meanings so that a Boolean never turns into `1` and an integer never into `true`.
///
/// ```swift
/// let colour: PropertyListValue = .integer(2)
/// let profile: PropertyListValue = ["name": "Ada", "age": 36, "admin": true]
/// ```
///
/// Equality is structural and exact: doubles compare by bit pattern so that `NaN == NaN` and
/// `0.0 != -0.0`, and strings (dictionary keys included) by their Unicode scalars, so that
/// `"caf\u{E9}"` and `"cafe\u{301}"` differ, as `NSString`s do. That is what "the same value
/// on every replica" needs.
public enum PropertyListValue: Sendable {
    case string(String)
    case integer(Int64)
    case double(Double)
    case bool(Bool)
    case date(Date)
    case data(Data)
    case array([PropertyListValue])
    case dictionary([String: PropertyListValue])
}

extension PropertyListValue: Equatable {
    /// Equal values of the same kind: strings by their UTF-8 bytes, doubles and dates by bit pattern.
    public static func == (lhs: PropertyListValue, rhs: PropertyListValue) -> Bool {
        switch (lhs, rhs) {
        case let (.string(a), .string(b)): return a.utf8.elementsEqual(b.utf8)
        case let (.integer(a), .integer(b)): return a == b
        case let (.double(a), .double(b)): return a.bitPattern == b.bitPattern
        case let (.bool(a), .bool(b)): return a == b
        case let (.date(a), .date(b)):
            return a.timeIntervalSinceReferenceDate.bitPattern == b.timeIntervalSinceReferenceDate.bitPattern
        case let (.data(a), .data(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.dictionary(a), .dictionary(b)):
            // A Swift dictionary holds no two canonically equivalent keys, so finding each key of
            // `a` in `b` and comparing its spelling there is an exact comparison.
            guard a.count == b.count else { return false }
            for (key, value) in a {
                guard let index = b.index(forKey: key), b[index].key.utf8.elementsEqual(key.utf8),
                      b[index].value == value else { return false }
            }
            return true
        default: return false
        }
    }
}

extension PropertyListValue: Hashable {
    /// Hashes what ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .string(let v):
            hasher.combine(0)
            var v = v
            v.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        case .integer(let v): hasher.combine(1); hasher.combine(v)
        case .double(let v): hasher.combine(2); hasher.combine(v.bitPattern)
        case .bool(let v): hasher.combine(3); hasher.combine(v)
        case .date(let v): hasher.combine(4); hasher.combine(v.timeIntervalSinceReferenceDate.bitPattern)
        case .data(let v): hasher.combine(5); hasher.combine(v)
        case .array(let v): hasher.combine(6); hasher.combine(v)
        case .dictionary(let v): hasher.combine(7); hasher.combine(v)
        }
    }
}

// MARK: - Literals

extension PropertyListValue: ExpressibleByStringLiteral {
    /// A ``string(_:)`` from a literal.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension PropertyListValue: ExpressibleByIntegerLiteral {
    /// An ``integer(_:)`` from a literal.
    public init(integerLiteral value: Int64) { self = .integer(value) }
}

extension PropertyListValue: ExpressibleByFloatLiteral {
    /// A ``double(_:)`` from a literal.
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension PropertyListValue: ExpressibleByBooleanLiteral {
    /// A ``bool(_:)`` from a literal.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension PropertyListValue: ExpressibleByArrayLiteral {
    /// An ``array(_:)`` from a literal.
    public init(arrayLiteral elements: PropertyListValue...) { self = .array(elements) }
}

extension PropertyListValue: ExpressibleByDictionaryLiteral {
    /// Builds a dictionary; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, PropertyListValue)...) {
        self = .dictionary(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: - Nesting

extension PropertyListValue {
    /// How deeply arrays and dictionaries nest in this value: 0 for a scalar, 1 for `[1]` or
    /// `[:]`, 2 for `[[1]]`, and so on; counted only up to `limit + 1`, so that checking a value
    /// against a limit costs no deeper recursion than the limit itself.
    package func nestingDepth(upTo limit: Int = StoreLimits.maximumNestingDepth) -> Int {
        switch self {
        case .array(let elements):
            guard limit >= 0 else { return 1 }
            var deepest = 0
            for element in elements where deepest < limit + 1 {
                deepest = max(deepest, element.nestingDepth(upTo: limit - 1))
            }
            return 1 + deepest
        case .dictionary(let entries):
            guard limit >= 0 else { return 1 }
            var deepest = 0
            for value in entries.values where deepest < limit + 1 {
                deepest = max(deepest, value.nestingDepth(upTo: limit - 1))
            }
            return 1 + deepest
        default:
            return 0
        }
    }
}

// MARK: - Typed accessors

extension PropertyListValue {
    /// The string, if this is a string.
    public var stringValue: String? { if case .string(let v) = self { v } else { nil } }
    /// The integer, if this is an integer (a Boolean is not an integer).
    public var integerValue: Int64? { if case .integer(let v) = self { v } else { nil } }
    /// The double, if this is a double.
    public var doubleValue: Double? { if case .double(let v) = self { v } else { nil } }
    /// The Boolean, if this is a Boolean (an integer is not a Boolean).
    public var boolValue: Bool? { if case .bool(let v) = self { v } else { nil } }
    /// The date, if this is a date.
    public var dateValue: Date? { if case .date(let v) = self { v } else { nil } }
    /// The bytes, if this is data.
    public var dataValue: Data? { if case .data(let v) = self { v } else { nil } }
    /// The elements, if this is an array.
    public var arrayValue: [PropertyListValue]? { if case .array(let v) = self { v } else { nil } }
    /// The entries, if this is a dictionary.
    public var dictionaryValue: [String: PropertyListValue]? { if case .dictionary(let v) = self { v } else { nil } }
}

extension PropertyListValue: CustomStringConvertible {
    /// The value as a short, readable text.
    public var description: String {
        switch self {
        case .string(let v): return String(reflecting: v)
        case .integer(let v): return String(v)
        case .double(let v): return String(v)
        case .bool(let v): return String(v)
        case .date(let v): return v.formatted(.iso8601)
        case .data(let v): return "<\(v.count) bytes>"
        case .array(let v): return "[" + v.map(\.description).joined(separator: ", ") + "]"
        case .dictionary(let v):
            let body = v.keys.sorted().map { "\(String(reflecting: $0)): \(v[$0]!.description)" }
            return "[" + (body.isEmpty ? ":" : body.joined(separator: ", ")) + "]"
        }
    }
}
