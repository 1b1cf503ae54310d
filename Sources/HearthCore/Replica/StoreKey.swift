import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A store key, compared and hashed by its exact Unicode scalars.
///
/// Apple's store compares keys as `NSString` does, literally: `"caf\u{E9}"` (é as one scalar)
/// and `"cafe\u{301}"` (e followed by a combining accent) are two keys. Swift's `String`
/// equality is canonical equivalence, under which they are one. So every place that holds
/// keys (the replica in memory, the file, the canonical encoding, the wire) holds them as
/// `StoreKey`s, and a key keeps the exact spelling it was written with.
///
/// ```swift
/// let composed: StoreKey = "caf\u{E9}", decomposed: StoreKey = "cafe\u{301}"
/// composed == decomposed        // false
/// composed.string == decomposed.string   // true: String's own rule
/// ```
public struct StoreKey: Sendable, Hashable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The key as written.
    public let string: String

    /// The key `string`, exactly as given.
    public init(_ string: String) { self.string = string }

    /// The key written as a literal.
    public init(stringLiteral value: String) { self.init(value) }

    /// The key's UTF-8 bytes: what its length limit counts and what the encodings carry.
    public var utf8: String.UTF8View { string.utf8 }

    /// Equal when the UTF-8 bytes are (not when the strings are canonically equivalent).
    public static func == (a: StoreKey, b: StoreKey) -> Bool {
        a.withUTF8 { x in b.withUTF8 { y in x.count == y.count && (x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0) } }
    }

    /// Hashes the UTF-8 bytes, to agree with ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) {
        withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Ordered by UTF-8 bytes, the one order every platform agrees on.
    public static func < (a: StoreKey, b: StoreKey) -> Bool {
        a.withUTF8 { x in
            b.withUTF8 { y in
                let common = min(x.count, y.count)
                let order = common == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, common)
                return order < 0 || (order == 0 && x.count < y.count)
            }
        }
    }

    /// The key's UTF-8 bytes, contiguous (native strings already are: no copy).
    private func withUTF8<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        var string = self.string
        return string.withUTF8(body)
    }

    /// The key itself.
    public var description: String { string }
}

extension Dictionary where Key == StoreKey {
    /// The same pairs keyed by `String`, where two store keys that differ only in Unicode
    /// normalisation are one key: of such a pair, the one last in UTF-8 order is kept, so the
    /// result does not depend on the dictionary's order.
    package var keyedByString: [String: Value] {
        var result: [String: Value] = [:]
        result.reserveCapacity(count)
        for (key, value) in self {
            if let index = result.index(forKey: key.string), StoreKey(result[index].key) > key { continue }
            result.removeValue(forKey: key.string)
            result[key.string] = value
        }
        return result
    }
}
