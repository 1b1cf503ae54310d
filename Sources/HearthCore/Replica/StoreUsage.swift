/// How much of a store's quota its live keys take (tombstones cost nothing).
///
/// ```swift
/// let usage = store.usage
/// print("\(usage.keys) keys, \(usage.bytes) of \(StoreLimits.maximumTotalSize) bytes")
/// ```
public struct StoreUsage: Sendable, Equatable {
    /// Sum over the live keys of the key's UTF-8 length plus the value's canonical size.
    public var bytes: Int
    /// Number of live keys.
    public var keys: Int

    /// A usage of `bytes` over `keys` keys.
    public init(bytes: Int = 0, keys: Int = 0) {
        self.bytes = bytes
        self.keys = keys
    }
}
