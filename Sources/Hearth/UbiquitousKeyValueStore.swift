import Foundation
import HearthCore
import Logging

/// A property-list value, the only kind the store holds (``UbiquitousKeyValueStore/value(forKey:)``).
public typealias PropertyListValue = HearthCore.PropertyListValue
/// An object that is not made of property-list types, with the path to the culprit.
public typealias NotAPropertyListError = HearthCore.NotAPropertyListError

/// A key-value store shared by every device of a household: Apple's iCloud key-value
/// store (`NSUbiquitousKeyValueStore`) for Linux, synced peer to peer on the LAN.
///
/// Use it as you would Apple's class; code written for it compiles unchanged:
///
/// ```swift
/// import Hearth
///
/// let store = NSUbiquitousKeyValueStore.default
/// NotificationCenter.default.addObserver(forName: NSUbiquitousKeyValueStore.didChangeExternallyNotification,
///                                        object: store, queue: nil) { note in
///     let reason = note.userInfo?[NSUbiquitousKeyValueStoreChangeReasonKey] as? Int
///     let keys = note.userInfo?[NSUbiquitousKeyValueStoreChangedKeysKey] as? [String]
/// }
/// store.synchronize()
/// store.set(2, forKey: "backgroundColor")
/// ```
///
/// Writes change memory at once and reach disk within about a second, or at
/// ``synchronize()``. Every method may be called from any thread.
///
/// Beside Apple's API there is a Swift-native one: ``value(forKey:)`` returns a
/// ``PropertyListValue``, ``setValue(_:forKey:)`` throws a ``KeyValueStoreError`` that
/// says why a write was refused, and ``changes`` delivers external changes as an
/// `AsyncSequence`.
public final class UbiquitousKeyValueStore: Sendable {
    /// Settings for opening a store (``StoreConfiguration``): the name apps spell it by.
    public typealias Configuration = StoreConfiguration

    /// Posted when values change because of another device, the first sync after sign-in,
    /// an account change, or a refused write; never for the app's own successful writes.
    ///
    /// `userInfo` holds ``NSUbiquitousKeyValueStoreChangeReasonKey`` (an `Int`, see
    /// ``ChangeReason``) and ``NSUbiquitousKeyValueStoreChangedKeysKey`` (a `[String]`).
    /// The notification's object is the store instance.
    public static let didChangeExternallyNotification = NSUbiquitousKeyValueStoreDidChangeExternallyNotification

    /// The store identifier: the name shared by every app and device that see the same data.
    public let storeIdentifier: String
    let backend: StoreBackend

    /// The app's store.
    ///
    /// Linux has no entitlements, so its identifier comes from, in order: the
    /// `HEARTH_STORE_IDENTIFIER` environment variable, the main bundle's identifier, and
    /// the executable's name. Apps that share data must agree on it.
    public static let `default` = UbiquitousKeyValueStore(storeIdentifier: defaultStoreIdentifier())

    /// Opens the store `storeIdentifier` with the default configuration.
    ///
    /// If another process of this user has the store open, this one attaches to it: both read
    /// and write the store, and each gets the other's writes as `serverChange` notifications
    /// (docs/local-attach.md). If the store cannot be persisted at all (the disk refuses, or
    /// the process holding it answers nobody), the error is logged, the store works in memory,
    /// and ``synchronize()`` returns `false`. Use ``init(storeIdentifier:configuration:)`` to
    /// get the error instead. An empty identifier gives a memory-only store.
    public convenience init(storeIdentifier: String) {
        self.init(storeIdentifier: storeIdentifier, configuration: Configuration(), tolerant: true)
    }

    /// Opens the store with the app's default identifier (see ``default``).
    public convenience init() {
        self.init(storeIdentifier: Self.defaultStoreIdentifier())
    }

    /// Opens the store `storeIdentifier`, throwing if its file cannot be used.
    ///
    /// ```swift
    /// let store = try UbiquitousKeyValueStore(storeIdentifier: "com.example.notes",
    ///                                         configuration: .init(dataDirectory: "/tmp/notes"))
    /// ```
    ///
    /// Another process of this user that has the store open hosts it for this one, which then
    /// attaches (``StoreConfiguration/attach``, default ``AttachMode/automatic``).
    ///
    /// - Throws: ``KeyValueStoreError`` with code ``KeyValueStoreError/Code/storeLocked`` when another
    ///   process has it open and this one may not attach (``AttachMode/embedded``) or could not
    ///   within 10 s, ``KeyValueStoreError/Code/persistenceFailed`` when its folder is unusable.
    public convenience init(storeIdentifier: String, configuration: Configuration) throws(KeyValueStoreError) {
        // The process's device for this data directory (HearthDevice, "The default devices").
        let backend = try HearthDevice.defaultDevice(for: configuration).backend(storeIdentifier: storeIdentifier, configuration: configuration)
        self.init(storeIdentifier: storeIdentifier, backend: backend)
    }

    private convenience init(storeIdentifier: String, configuration: Configuration, tolerant: Bool) {
        do {
            try self.init(storeIdentifier: storeIdentifier, configuration: configuration)
        } catch {
            configuration.logger.error("store works in memory only: \(error)", metadata: ["store": "\(storeIdentifier)"])
            self.init(storeIdentifier: storeIdentifier,
                      backend: StoreTable.memoryBackend(storeIdentifier: storeIdentifier, configuration: configuration))
        }
    }

    init(storeIdentifier: String, backend: StoreBackend) {
        self.storeIdentifier = storeIdentifier
        self.backend = backend
        backend.register(self)
    }

    static func defaultStoreIdentifier(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let id = environment["HEARTH_STORE_IDENTIFIER"], !id.isEmpty { return id }
        if let id = Bundle.main.bundleIdentifier, !id.isEmpty { return id }
        return ProcessInfo.processInfo.processName
    }

    /// The path of this store's file, or `nil` for a memory-only store.
    public var fileURL: URL? {
        backend.location.map { URL(fileURLWithPath: $0.filePath) }
    }

    /// Writes what is in memory to disk, asks the sync engine to push to every connected
    /// peer now, and returns whether the disk holds every change made before the call.
    ///
    /// Attached to another process that hosts the store, it asks that process to save and
    /// waits (at most 10 s) until this process's writes are on disk.
    ///
    /// What peers delivered is already merged: deltas apply as they arrive. Returns `false`
    /// when the store has no identifier or cannot persist (see ``init(storeIdentifier:)``).
    /// As with Apple's store, calling it is rarely needed: changes reach disk within a
    /// second and peers at once anyway.
    @discardableResult
    public func synchronize() -> Bool {
        let saved = backend.flush()
        backend.syncEngine?.pushNow()
        return saved
    }
}
