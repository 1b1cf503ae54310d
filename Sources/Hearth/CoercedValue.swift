import Foundation
import HearthCore

/// A stored value as Apple's typed getters read it (``UbiquitousKeyValueStore/longLong(forKey:)``
/// and the rest): numbers convert among themselves as `NSNumber` converts them, collections
/// come out as Foundation objects, and a value that is absent or of another kind reads as
/// `nil`, zero or `false`. Apple's getters never fail; this is where they decide what to return.
struct CoercedValue {
    let value: PropertyListValue?

    init(_ value: PropertyListValue?) {
        self.value = value
    }

    /// `String`, `Bool`, `NSNumber`, `Date`, `Data`, `[Any]` or `[String: Any]`.
    var object: Any? { value?.foundationObject }

    var string: String? { value?.stringValue }

    var data: Data? { value?.dataValue }

    var array: [Any]? {
        guard case .array(let elements)? = value else { return nil }
        return elements.map(\.foundationObject)
    }

    var dictionary: [String: Any]? {
        guard case .dictionary(let entries)? = value else { return nil }
        return entries.mapValues(\.foundationObject)
    }

    /// A double truncated toward zero (and clamped to `Int64`'s range, NaN as 0), a Boolean as 0 or 1.
    var longLong: Int64 {
        switch value {
        case .integer(let v)?: return v
        case .double(let v)?:
            if v.isNaN { return 0 }
            if v >= 9_223_372_036_854_775_807.0 { return .max }
            if v <= -9_223_372_036_854_775_808.0 { return .min }
            return Int64(v)
        case .bool(let v)?: return v ? 1 : 0
        default: return 0
        }
    }

    /// An integer or a Boolean converted; 0 for anything else.
    var double: Double {
        switch value {
        case .double(let v)?: return v
        case .integer(let v)?: return Double(v)
        case .bool(let v)?: return v ? 1 : 0
        default: return 0
        }
    }

    /// A non-zero number is `true`; anything else but a Boolean is `false`.
    var bool: Bool {
        switch value {
        case .bool(let v)?: return v
        case .integer(let v)?: return v != 0
        case .double(let v)?: return v != 0
        default: return false
        }
    }
}
