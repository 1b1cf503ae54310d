import Foundation

/// Why the store's data changed without the app writing it, with Apple's numbering.
///
/// The raw values are Apple's `NSUbiquitousKeyValueStore…Change` constants, so code that
/// reads `userInfo[NSUbiquitousKeyValueStoreChangeReasonKey] as? Int` works unchanged.
public enum ChangeReason: Int, Sendable, Hashable, CaseIterable {
    /// Another device of the household wrote new values.
    case serverChange = 0
    /// The first download from the household's devices after signing in.
    case initialSyncChange = 1
    /// A write was refused because it would exceed a quota; nothing changed.
    case quotaViolationChange = 2
    /// The device switched to another account; the data was replaced wholesale.
    case accountChange = 3
}

/// One batch of changes the app did not make itself (or a refused write).
///
/// ```swift
/// for await change in store.changes {
///     print(change.reason, change.keys)
/// }
/// ```
public struct ChangeEvent: Sendable, Hashable {
    /// Why the values changed.
    public var reason: ChangeReason
    /// The keys whose values changed (for a quota violation: the key of the refused write).
    public var keys: [String]

    /// A change of `keys` for `reason`.
    public init(reason: ChangeReason, keys: [String]) {
        self.reason = reason
        self.keys = keys
    }
}
