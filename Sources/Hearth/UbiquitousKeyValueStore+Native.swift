import Foundation
import HearthCore

/// How much of its quota a store uses (``UbiquitousKeyValueStore/usage``).
public typealias StoreUsage = HearthCore.StoreUsage
/// A key exactly as written: two keys that differ only in Unicode normalisation are two keys, as in Apple's store.
public typealias StoreKey = HearthCore.StoreKey

// The Swift-native API: typed values, throwing setters, and an AsyncSequence of changes.

extension UbiquitousKeyValueStore {
    /// The value for `key`, or `nil` if there is none.
    ///
    /// ```swift
    /// if case .integer(let colour)? = store.value(forKey: "backgroundColor") { … }
    /// ```
    public func value(forKey key: String) -> PropertyListValue? {
        backend.value(forKey: key)
    }

    /// Stores `value` (`nil` removes the key), or throws why not and changes nothing.
    ///
    /// ```swift
    /// try store.setValue(["x": 1.5, "y": 2.0], forKey: "position")
    /// ```
    ///
    /// - Throws: ``KeyValueStoreError`` with code ``KeyValueStoreError/Code/keyTooLong``,
    ///   ``KeyValueStoreError/Code/tooDeep``, ``KeyValueStoreError/Code/valueTooLarge``, ``KeyValueStoreError/Code/storeFull`` or
    ///   ``KeyValueStoreError/Code/tooManyKeys``. Unlike Apple's setters, no quota-violation
    ///   notification is posted: the error says it.
    public func setValue(_ value: PropertyListValue?, forKey key: String) throws(KeyValueStoreError) {
        try backend.write(value, forKey: key)
    }

    /// Converts a Foundation object and stores it, or throws why not.
    ///
    /// - Throws: ``KeyValueStoreError/Code/notAPropertyList`` for anything but
    ///   property-list types, and the errors of ``setValue(_:forKey:)``.
    public func setObject(_ object: Any, forKey key: String) throws(KeyValueStoreError) {
        let value: PropertyListValue
        do { value = try PropertyListValue(foundation: object) } catch {
            throw KeyValueStoreError(converting: error, key: key)
        }
        try backend.write(value, forKey: key)
    }

    /// Removes `key`'s value, if any.
    public func removeValue(forKey key: String) throws(KeyValueStoreError) {
        try backend.write(nil, forKey: key)
    }

    /// Every key and its value.
    ///
    /// Of two keys that differ only in Unicode normalisation (two keys in the store, one in a
    /// Swift dictionary), it holds the one that sorts last by UTF-8 bytes; ``keys`` lists both.
    public var values: [String: PropertyListValue] {
        backend.visibleValues.keyedByString
    }

    /// Every key that has a value, exactly as written, in ascending order of UTF-8 bytes.
    ///
    /// Keys are compared by their Unicode scalars, as `NSString` compares them:
    /// `"caf\u{E9}"` and `"cafe\u{301}"` are two keys, both listed here.
    public var keys: [String] {
        backend.visibleValues.keys.sorted().map(\.string)
    }

    /// How much of the quotas the store uses: bytes (of `StoreLimits.maximumTotalSize`)
    /// and keys (of `StoreLimits.maximumKeyCount`).
    public var usage: StoreUsage {
        backend.usage
    }

    /// The changes this store did not make itself, as they happen: one ``ChangeEvent`` per
    /// applied batch, and one per refused write of Apple's setters.
    ///
    /// Each access makes a new sequence that sees every event from then on.
    ///
    /// ```swift
    /// for await change in store.changes where change.reason == .serverChange {
    ///     refresh(change.keys)
    /// }
    /// ```
    public var changes: AsyncStream<ChangeEvent> {
        backend.makeStream()
    }

}
