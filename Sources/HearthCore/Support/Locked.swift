#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value that is only ever read or changed under a pthread mutex.
///
/// Hearth keeps its shared state in these rather than in `Synchronization.Mutex`, whose
/// futex-based lock ThreadSanitizer cannot see on Linux: with a pthread mutex, `swift test
/// --sanitize=thread` checks Hearth's locking for real instead of reporting every critical
/// section as a race (docs/architecture.md, "Concurrency").
///
/// ```swift
/// let counter = Locked(0)
/// counter.withLock { $0 += 1 }
/// ```
package final class Locked<Value: ~Copyable & Sendable>: @unchecked Sendable {
    // @unchecked: `value` is touched only inside `withLock`, with `mutex` held. Inlinable, so
    // callers in other modules get a specialised, closure-free critical section, as with Mutex.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    package init(_ value: consuming Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, exclusively. Never call user code, block, or take the
    /// same lock again in `body`.
    @inlinable
    package func withLock<Result: ~Copyable, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

// Reflection (a failed `#expect` showing its operands, `dump`) would read the value without the
// lock, and crashes on a ~Copyable one (a store's state): it shows no children instead.
extension Locked: CustomReflectable where Value: ~Copyable {
    package var customMirror: Mirror { Mirror(self, children: [:]) }
}
