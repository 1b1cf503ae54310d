import Foundation
import HearthCore

/// Copies external changes of a store into a `UserDefaults` suite: the pattern of Apple's
/// "Storing Preferences in iCloud" (seed 002), where the defaults database stays the app's
/// local source of truth and the key-value store carries changes between devices.
///
/// ```swift
/// let mirror = UserDefaultsMirror(store: .default, defaults: .standard, keys: ["backgroundColor"])
/// // … later, another device sets backgroundColor: UserDefaults.standard now has it, on disk.
/// ```
///
/// Foundation's `UserDefaults` on Linux writes to disk only on `synchronize()`, so the
/// mirror calls it after each batch. A key removed from the store is removed from the
/// defaults. The mirror stops when it is deallocated or on ``stop()``.
public final class UserDefaultsMirror: Sendable {
    private let store: UbiquitousKeyValueStore
    private let suiteName: String?
    private let keys: Set<String>?
    private let task = Locked<Task<Void, Never>?>(nil)
    /// Signalled after each batch is copied (and synchronized): Foundation on Linux announces
    /// no change of a defaults suite, so this is what a test waits on.
    package let copied = ChangeSignal()

    /// Mirrors `keys` (all keys when `nil`) of `store` into the defaults suite `suiteName`
    /// (`nil`: the standard defaults).
    public init(store: UbiquitousKeyValueStore, suiteName: String? = nil, keys: Set<String>? = nil) {
        self.store = store
        self.suiteName = suiteName
        self.keys = keys
        let changes = store.changes
        let running = Task { [weak self] in
            for await change in changes where change.reason != .quotaViolationChange {
                guard let self else { return }
                self.copy(change.keys)
            }
        }
        task.withLock { $0 = running }
    }

    deinit { stop() }

    /// The defaults suite written to.
    public var defaults: UserDefaults {
        suiteName.flatMap { UserDefaults(suiteName: $0) } ?? .standard
    }

    /// Copies the current value of every mirrored key, e.g. at launch.
    public func copyAll() {
        copy(Array(keys ?? Set(store.values.keys)))
    }

    /// Stops mirroring.
    public func stop() {
        task.withLock { $0?.cancel() }
    }

    private func copy(_ changed: [String]) {
        let defaults = self.defaults
        for key in changed where keys?.contains(key) ?? true {
            if let object = store.object(forKey: key) {
                defaults.set(object, forKey: key)
            } else {
                defaults.removeObject(forKey: key)
            }
        }
        defaults.synchronize()
        copied.signal()
    }
}
