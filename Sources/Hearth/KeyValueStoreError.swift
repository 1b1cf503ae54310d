import Foundation
import HearthCore

/// Why the store refused a write or could not open its file.
///
/// Thrown by the Swift-native API (``UbiquitousKeyValueStore/setValue(_:forKey:)``);
/// Apple's setters log the same error instead, as Apple documents.
///
/// ```swift
/// do {
///     try store.setValue(.data(bigBlob), forKey: "save")
/// } catch let error as KeyValueStoreError where error.code == .valueTooLarge {
///     …
/// }
/// ```
public struct KeyValueStoreError: Error, Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What kind of failure this is: compare it with the static members (`error.code == .storeFull`).
    /// An extensible set, so new codes can come without breaking `switch` statements.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code's name, such as `"storeFull"`.
        public let rawValue: String
        /// A code of this name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code's name.
        public var description: String { rawValue }

        /// The key is longer than 64 bytes of UTF-8.
        public static let keyTooLong = Code(rawValue: "keyTooLong")
        /// The value nests arrays and dictionaries deeper than
        /// `StoreLimits.maximumNestingDepth` (256) levels.
        public static let tooDeep = Code(rawValue: "tooDeep")
        /// The key and value together exceed the 1 MB per-value quota.
        public static let valueTooLarge = Code(rawValue: "valueTooLarge")
        /// The write would take the store beyond its 1 MB total.
        public static let storeFull = Code(rawValue: "storeFull")
        /// The write would add a 1025th key.
        public static let tooManyKeys = Code(rawValue: "tooManyKeys")
        /// The value is not made of property-list types.
        public static let notAPropertyList = Code(rawValue: "notAPropertyList")
        /// Strict mode (``SyncSettings/discardWritesBeforeInitialSync``): the first download
        /// from the account's peers has not happened yet.
        public static let initialSyncPending = Code(rawValue: "initialSyncPending")
        /// Another process has this store open, and this one may not attach to it
        /// (``AttachMode/embedded``) or could not (docs/local-attach.md).
        public static let storeLocked = Code(rawValue: "storeLocked")
        /// The store's file could not be read or written.
        public static let persistenceFailed = Code(rawValue: "persistenceFailed")
        /// This device's sync engine could not be set up (its TLS identity, say).
        public static let syncUnavailable = Code(rawValue: "syncUnavailable")
        /// ``AttachMode/required``: no device daemon runs for this user, or it would not
        /// hold the store.
        public static let daemonUnavailable = Code(rawValue: "daemonUnavailable")
        /// The ``HearthDevice`` the store was asked of has stopped (``HearthDevice/stop()``).
        public static let deviceStopped = Code(rawValue: "deviceStopped")
    }

    /// What kind of failure this is.
    public let code: Code
    /// The key concerned, if any.
    public let key: String?
    /// What went wrong, for people.
    public let reason: String
    /// The error underneath, if any (the file system's, for ``Code/persistenceFailed``).
    public let underlying: (any Error & Sendable)?
    /// Where the error was made, for ``debugDescription``.
    let file: String
    let line: UInt

    /// An error of `code` about `key`, explained by `reason`.
    public init(code: Code, key: String?, reason: String, underlying: (any Error & Sendable)? = nil,
                file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.key = key
        self.reason = reason
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    /// Errors are equal when their codes and keys are: the reason is prose and may change.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code && lhs.key == rhs.key }

    /// Hashes what ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(key)
    }

    /// The reason, with the key if there is one.
    public var description: String {
        key.map { "\(reason) (key \(String(reflecting: $0)))" } ?? reason
    }

    /// The description, the code and where the error was made.
    public var debugDescription: String { "KeyValueStoreError.\(code): \(description) [\(file):\(line)]" }

    /// Whether Apple's setters report this with a quota-violation notification.
    public var isQuotaViolation: Bool { code == .valueTooLarge || code == .storeFull || code == .tooManyKeys }

    /// The error for a write that breaks one of ``StoreLimits``' per-entry rules.
    init(violation: EntryRuleViolation, key: String) {
        let code: Code = switch violation.code {
        case .keyTooLong: .keyTooLong
        case .tooDeep: .tooDeep
        default: .valueTooLarge
        }
        self.init(code: code, key: key, reason: violation.reason, underlying: violation)
    }

    /// The error for a write of `key` that the replica's rules refuse (``StoreLimits``, the quotas, strict mode).
    init(_ refusal: SyncedReplica.LocalRefusal, key: String) {
        switch refusal {
        case .entry(let violation): self.init(violation: violation, key: key)
        case .initialSyncPending: self = .initialSyncPending(key)
        case .tooManyKeys: self = .tooManyKeys(key)
        case .storeFull(let total): self = .storeFull(key, total: total)
        }
    }

    static func storeFull(_ key: String, total: Int) -> Self {
        Self(code: .storeFull, key: key, reason: "the store would hold \(total) bytes; the limit is \(StoreLimits.maximumTotalSize)")
    }

    static func tooManyKeys(_ key: String) -> Self {
        Self(code: .tooManyKeys, key: key, reason: "the store would hold more than \(StoreLimits.maximumKeyCount) keys")
    }

    static func initialSyncPending(_ key: String) -> Self {
        Self(code: .initialSyncPending, key: key, reason: "the first sync with the account's devices has not happened yet (strict mode)")
    }

    /// The error for an object that could not be converted to a ``PropertyListValue``.
    init(converting error: NotAPropertyListError, key: String) {
        self.init(code: error.isTooDeep ? .tooDeep : .notAPropertyList, key: key, reason: error.description)
    }

    static func notAPropertyList(_ key: String, _ detail: String) -> Self {
        Self(code: .notAPropertyList, key: key, reason: detail)
    }
}

/// The limits of Apple's key-value store, which Hearth keeps exactly (see
/// `HearthCore.StoreLimits`).
public typealias StoreLimits = HearthCore.StoreLimits
