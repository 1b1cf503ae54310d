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
/// Equality is structural; doubles compare by bit pattern so that `NaN == NaN` and
/// `0.0 != -0.0`, which is what "the same value on every replica" needs.
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
    public static func == (lhs: PropertyListValue, rhs: PropertyListValue) -> Bool {
        switch (lhs, rhs) {
        case let (.string(a), .string(b)): return a == b
        case let (.integer(a), .integer(b)): return a == b
        case let (.double(a), .double(b)): return a.bitPattern == b.bitPattern
        case let (.bool(a), .bool(b)): return a == b
        case let (.date(a), .date(b)):
            return a.timeIntervalSinceReferenceDate.bitPattern == b.timeIntervalSinceReferenceDate.bitPattern
        case let (.data(a), .data(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.dictionary(a), .dictionary(b)): return a == b
        default: return false
        }
    }
}

extension PropertyListValue: Hashable {
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .string(let v): hasher.combine(0); hasher.combine(v)
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
    public init(stringLiteral value: String) { self = .string(value) }
}

extension PropertyListValue: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int64) { self = .integer(value) }
}

extension PropertyListValue: ExpressibleByFloatLiteral {
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension PropertyListValue: ExpressibleByBooleanLiteral {
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension PropertyListValue: ExpressibleByArrayLiteral {
    public init(arrayLiteral elements: PropertyListValue...) { self = .array(elements) }
}

extension PropertyListValue: ExpressibleByDictionaryLiteral {
    /// Builds a dictionary; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, PropertyListValue)...) {
        self = .dictionary(Dictionary(elements, uniquingKeysWith: { _, last in last }))
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
