import Foundation

/// Why an object cannot be stored: it is not a property list.
public struct NotAPropertyListError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Where in the object the problem is, e.g. `root["tags"][2]`.
    public let path: String
    /// What was found there.
    public let found: String
    /// Whether the problem is nesting deeper than ``StoreLimits/maximumNestingDepth`` (the
    /// store reports that as `tooDeep`, not as a value that is not a property list).
    public var isTooDeep = false

    /// Where and what, for a log line.
    public var description: String { "\(path) is not a property-list value (found \(found))" }
}

extension PropertyListValue {
    /// Converts a Foundation property-list object (or its Swift counterpart) exactly.
    ///
    /// Accepts `String`/`NSString`, `Bool`, every fixed-width integer, `Float`, `Double`,
    /// `NSNumber` (a Boolean `NSNumber` stays a Boolean, an integer one an integer),
    /// `CGFloat` (as a double, as it bridges to `NSNumber` on Apple's platforms),
    /// `Date`/`NSDate`, `Data`/`NSData`, arrays and dictionaries with `String` keys of
    /// these, and `PropertyListValue` itself. Anything else throws, naming where it is, and
    /// so do arrays and dictionaries nested deeper than ``StoreLimits/maximumNestingDepth``
    /// (conversion stops there, so an absurdly deep object cannot exhaust the stack).
    ///
    /// ```swift
    /// let value = try PropertyListValue(foundation: ["size": 3, "bold": true])
    /// // .dictionary(["size": .integer(3), "bold": .bool(true)])
    /// ```
    public init(foundation object: Any) throws(NotAPropertyListError) {
        do {
            self = try Self.convert(object, path: "", depth: 0)
        } catch {
            throw NotAPropertyListError(path: "root" + error.path, found: error.found, isTooDeep: error.isTooDeep)
        }
    }

    // Boolean NSNumbers are instances of a private subclass on every platform.
    private static let booleanNumberClass: AnyClass = type(of: NSNumber(value: true))

    /// `path` is the position below the value being converted; containers add their part
    /// only when an error passes through them, so the happy path builds no strings.
    /// `depth` counts the arrays and dictionaries around `object`.
    private static func convert(_ object: Any, path: String, depth: Int) throws(NotAPropertyListError) -> PropertyListValue {
        // Exact Swift types first: a dynamic cast per type tried is what conversion costs.
        let type = Swift.type(of: object)
        if type == String.self { return .string(object as! String) }
        if type == Int.self { return .integer(Int64(object as! Int)) }
        if type == Bool.self { return .bool(object as! Bool) }
        if type == Double.self { return .double(object as! Double) }
        if type == [String: Any].self { return try convert(dictionary: object as! [String: Any], path: path, depth: depth) }
        if type == [Any].self { return try convert(array: object as! [Any], path: path, depth: depth) }
        // Not bridged to NSNumber by Foundation on Linux, as it is on Apple's platforms.
        if type == CGFloat.self { return .double(Double(object as! CGFloat)) }
        // NSNumber before the casts below: casting one to Bool or Int succeeds for 0 and 1 and would lose its kind.
        if type is NSNumber.Type, let number = object as? NSNumber { return try convert(number, path: path) }
        switch object {
        case let v as PropertyListValue: return v
        case let v as String: return .string(v)
        case let v as Bool: return .bool(v)
        case let v as Int: return .integer(Int64(v))
        case let v as Int64: return .integer(v)
        case let v as Double: return .double(v)
        case let v as Date: return .date(v)
        case let v as Data: return .data(v)
        case let v as Int8: return .integer(Int64(v))
        case let v as Int16: return .integer(Int64(v))
        case let v as Int32: return .integer(Int64(v))
        case let v as UInt8: return .integer(Int64(v))
        case let v as UInt16: return .integer(Int64(v))
        case let v as UInt32: return .integer(Int64(v))
        case let v as UInt:
            guard let i = Int64(exactly: v) else { throw NotAPropertyListError(path: path, found: "unsigned integer \(v) beyond Int64") }
            return .integer(i)
        case let v as UInt64:
            guard let i = Int64(exactly: v) else { throw NotAPropertyListError(path: path, found: "unsigned integer \(v) beyond Int64") }
            return .integer(i)
        case let v as Float: return .double(Double(v))
        case let v as CGFloat: return .double(Double(v))
        case let v as [Any]: return try convert(array: v, path: path, depth: depth)
        case let v as [String: Any]: return try convert(dictionary: v, path: path, depth: depth)
        default:
            return try convertObject(object, path: path, depth: depth)
        }
    }

    /// Refuses a container that would nest deeper than the store allows.
    private static func enter(path: String, depth: Int) throws(NotAPropertyListError) {
        guard depth < StoreLimits.maximumNestingDepth else {
            throw NotAPropertyListError(path: path, found: "arrays and dictionaries nested more than \(StoreLimits.maximumNestingDepth) levels deep",
                                        isTooDeep: true)
        }
    }

    private static func convert(array: [Any], path: String, depth: Int) throws(NotAPropertyListError) -> PropertyListValue {
        try enter(path: path, depth: depth)
        var out: [PropertyListValue] = []
        out.reserveCapacity(array.count)
        for (i, element) in array.enumerated() {
            do { out.append(try convert(element, path: "", depth: depth + 1)) } catch {
                throw NotAPropertyListError(path: "[\(i)]" + error.path, found: error.found, isTooDeep: error.isTooDeep)
            }
        }
        return .array(out)
    }

    private static func convert(dictionary: [String: Any], path: String, depth: Int) throws(NotAPropertyListError) -> PropertyListValue {
        try enter(path: path, depth: depth)
        var out: [String: PropertyListValue] = [:]
        out.reserveCapacity(dictionary.count)
        for (key, element) in dictionary {
            do { out[key] = try convert(element, path: "", depth: depth + 1) } catch {
                throw NotAPropertyListError(path: "[\(String(reflecting: key))]" + error.path, found: error.found, isTooDeep: error.isTooDeep)
            }
        }
        return .dictionary(out)
    }

    private static func convert(_ number: NSNumber, path: String) throws(NotAPropertyListError) -> PropertyListValue {
        if type(of: number) == booleanNumberClass { return .bool(number.boolValue) }
        switch String(cString: number.objCType) {
        case "f", "d": return .double(number.doubleValue)
        case "Q", "L", "I":
            guard let i = Int64(exactly: number.uint64Value) else {
                throw NotAPropertyListError(path: path, found: "unsigned integer \(number.uint64Value) beyond Int64")
            }
            return .integer(i)
        default: return .integer(number.int64Value)
        }
    }

    /// Foundation class instances and loosely typed collections.
    private static func convertObject(_ object: Any, path: String, depth: Int) throws(NotAPropertyListError) -> PropertyListValue {
        if let number = object as? NSNumber { return try convert(number, path: path) }
        if let v = object as? NSString { return .string(v as String) }
        if let v = object as? NSDate { return .date(v as Date) }
        if let v = object as? NSData { return .data(v as Data) }
        if let v = object as? NSArray { return try convert(array: v.map { $0 }, path: path, depth: depth) }
        if let v = object as? [AnyHashable: Any] ?? (object as? NSDictionary).map({ dict in
            var out: [AnyHashable: Any] = [:]
            for (key, value) in dict { out[key as! AnyHashable] = value }
            return out
        }) {
            try enter(path: path, depth: depth)
            var out: [String: PropertyListValue] = [:]
            for (key, element) in v {
                guard let key = key.base as? String ?? (key.base as? NSString).map({ $0 as String }) else {
                    throw NotAPropertyListError(path: path, found: "a dictionary key of type \(type(of: key.base))")
                }
                do { out[key] = try convert(element, path: "", depth: depth + 1) } catch {
                    throw NotAPropertyListError(path: "[\(String(reflecting: key))]" + error.path, found: error.found, isTooDeep: error.isTooDeep)
                }
            }
            return .dictionary(out)
        }
        let mirror = Mirror(reflecting: object)
        if mirror.displayStyle == .optional {
            if let wrapped = mirror.children.first?.value { return try convert(wrapped, path: path, depth: depth) }
            throw NotAPropertyListError(path: path, found: "nil")
        }
        throw NotAPropertyListError(path: path, found: "a value of type \(type(of: object))")
    }

    /// The Foundation object for this value, as Apple's store returns it: `String`, `Bool`,
    /// `NSNumber` for integers and doubles (so `as? Int`, `as? Int64` and `as? Double`
    /// all work, as on Apple's platforms), `Date`, `Data`, `[Any]` and `[String: Any]`.
    public var foundationObject: Any {
        switch self {
        case .string(let v): return v
        case .integer(let v): return NSNumber(value: v)
        case .double(let v): return NSNumber(value: v)
        case .bool(let v): return v
        case .date(let v): return v
        case .data(let v): return v
        case .array(let v): return v.map(\.foundationObject)
        case .dictionary(let v): return v.mapValues(\.foundationObject)
        }
    }
}
