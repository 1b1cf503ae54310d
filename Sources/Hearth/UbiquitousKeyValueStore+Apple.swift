import Foundation
import HearthCore

// Apple's API, with Apple's Swift spelling and behaviour (seed 003). Setters never throw:
// a key that is too long or a value that is not a property list is logged and ignored;
// a write over a quota changes nothing and posts a quotaViolationChange notification.

extension UbiquitousKeyValueStore {
    // MARK: Getters

    /// The value for `aKey` as a Foundation object (`String`, `Bool`, `NSNumber`, `Date`,
    /// `Data`, `[Any]`, `[String: Any]`), or `nil` if there is none.
    public func object(forKey aKey: String) -> Any? {
        CoercedValue(backend.value(forKey: aKey)).object
    }

    /// The string for `aKey`, or `nil` if absent or not a string.
    public func string(forKey aKey: String) -> String? {
        CoercedValue(backend.value(forKey: aKey)).string
    }

    /// The array for `aKey`, or `nil` if absent or not an array.
    public func array(forKey aKey: String) -> [Any]? {
        CoercedValue(backend.value(forKey: aKey)).array
    }

    /// The dictionary for `aKey`, or `nil` if absent or not a dictionary.
    public func dictionary(forKey aKey: String) -> [String: Any]? {
        CoercedValue(backend.value(forKey: aKey)).dictionary
    }

    /// The data for `aKey`, or `nil` if absent or not data.
    public func data(forKey aKey: String) -> Data? {
        CoercedValue(backend.value(forKey: aKey)).data
    }

    /// The integer for `aKey`; 0 if absent or not a number. A double is truncated toward
    /// zero (and clamped to `Int64`'s range), a Boolean is 0 or 1, as `NSNumber` does.
    public func longLong(forKey aKey: String) -> Int64 {
        CoercedValue(backend.value(forKey: aKey)).longLong
    }

    /// The double for `aKey`; 0 if absent or not a number (integers and Booleans convert).
    public func double(forKey aKey: String) -> Double {
        CoercedValue(backend.value(forKey: aKey)).double
    }

    /// The Boolean for `aKey`; `false` if absent or not a number (a non-zero number is `true`).
    public func bool(forKey aKey: String) -> Bool {
        CoercedValue(backend.value(forKey: aKey)).bool
    }

    /// Every key and value, as Foundation objects.
    ///
    /// Keys are exact in the store (see ``StoreKey``), but a Swift `[String: Any]` cannot hold
    /// two keys that differ only in Unicode normalisation: of such a pair it holds the value of
    /// the one that sorts last by UTF-8 bytes. ``keys`` lists every key exactly.
    public var dictionaryRepresentation: [String: Any] {
        backend.visibleValues.keyedByString.mapValues(\.foundationObject)
    }

    // MARK: Setters

    /// Stores a property-list object (`nil` removes the key). Anything else is logged and ignored.
    public func set(_ anObject: Any?, forKey aKey: String) {
        guard let anObject else { return removeObject(forKey: aKey) }
        do {
            try write(PropertyListValue(foundation: anObject), forKey: aKey)
        } catch {
            report(KeyValueStoreError(converting: error, key: aKey))
        }
    }

    /// Stores a string (`nil` removes the key).
    public func set(_ aString: String?, forKey aKey: String) {
        write(aString.map(PropertyListValue.string), forKey: aKey)
    }

    /// Stores data (`nil` removes the key).
    public func set(_ aData: Data?, forKey aKey: String) {
        write(aData.map(PropertyListValue.data), forKey: aKey)
    }

    /// Stores an array of property-list objects (`nil` removes the key).
    public func set(_ anArray: [Any]?, forKey aKey: String) {
        set(anArray as Any?, forKey: aKey)
    }

    /// Stores a dictionary of property-list objects (`nil` removes the key). The whole
    /// dictionary is written in one atomic step, or nothing is.
    public func set(_ aDictionary: [String: Any]?, forKey aKey: String) {
        set(aDictionary as Any?, forKey: aKey)
    }

    /// Stores a 64-bit integer.
    public func set(_ value: Int64, forKey aKey: String) {
        write(.integer(value), forKey: aKey)
    }

    /// Stores a double.
    public func set(_ value: Double, forKey aKey: String) {
        write(.double(value), forKey: aKey)
    }

    /// Stores a Boolean.
    public func set(_ value: Bool, forKey aKey: String) {
        write(.bool(value), forKey: aKey)
    }

    /// Removes `aKey`'s value; does nothing if there is none.
    public func removeObject(forKey aKey: String) {
        write(nil, forKey: aKey)
    }

    // MARK: Private

    private func write(_ value: PropertyListValue?, forKey key: String) {
        do {
            try backend.write(value, forKey: key)
        } catch {
            report(error)
        }
    }

    /// Apple logs a refused write; a quota violation is also posted as a notification.
    private func report(_ error: KeyValueStoreError) {
        backend.logger.error("write refused: \(error)", metadata: ["store": "\(storeIdentifier)", "code": "\(error.code)"])
        if error.isQuotaViolation, let key = error.key {
            backend.post(ChangeEvent(reason: .quotaViolationChange, keys: [key]))
        } else if error.code == .initialSyncPending, let key = error.key {
            // Apple: "your attempt to write was discarded because an initial download has not occurred".
            backend.post(ChangeEvent(reason: .initialSyncChange, keys: [key]))
        }
    }
}
