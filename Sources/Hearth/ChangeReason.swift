import Foundation
import HearthCore

/// Why values changed from outside the app: Apple's `NSUbiquitousKeyValueStoreChangeReasonKey` values.
public typealias ChangeReason = HearthCore.ChangeReason
/// One external change: its reason and the keys it touched (``UbiquitousKeyValueStore/changes``).
public typealias ChangeEvent = HearthCore.ChangeEvent

// MARK: - Apple's global names

/// Apple's class name, so that code written for iCloud compiles unchanged.
public typealias NSUbiquitousKeyValueStore = UbiquitousKeyValueStore

/// `userInfo` key of the change notification: the reason, an `Int` (see ``ChangeReason``).
public let NSUbiquitousKeyValueStoreChangeReasonKey = "NSUbiquitousKeyValueStoreChangeReasonKey"
/// `userInfo` key of the change notification: the changed keys, a `[String]`.
public let NSUbiquitousKeyValueStoreChangedKeysKey = "NSUbiquitousKeyValueStoreChangedKeysKey"
/// Objective-C's name for ``UbiquitousKeyValueStore/didChangeExternallyNotification``.
public let NSUbiquitousKeyValueStoreDidChangeExternallyNotification =
    Notification.Name("NSUbiquitousKeyValueStoreDidChangeExternallyNotification")

/// Another device changed values (`ChangeReason.serverChange`).
public var NSUbiquitousKeyValueStoreServerChange: Int { ChangeReason.serverChange.rawValue }
/// The first sync after sign-in (`ChangeReason.initialSyncChange`).
public var NSUbiquitousKeyValueStoreInitialSyncChange: Int { ChangeReason.initialSyncChange.rawValue }
/// A write exceeded a quota (`ChangeReason.quotaViolationChange`).
public var NSUbiquitousKeyValueStoreQuotaViolationChange: Int { ChangeReason.quotaViolationChange.rawValue }
/// The account changed (`ChangeReason.accountChange`).
public var NSUbiquitousKeyValueStoreAccountChange: Int { ChangeReason.accountChange.rawValue }
