import NIOConcurrencyHelpers

/// A value that is only ever read or changed under a pthread mutex (NIO's `NIOLock`).
///
/// The store's state lives in one of these rather than in `Synchronization.Mutex`, whose
/// futex-based lock ThreadSanitizer cannot see on Linux: with it, `swift test
/// --sanitize=thread` checks the store's locking for real instead of reporting every
/// critical section as a race (docs/architecture.md, "Concurrency").
final class Locked<Value: ~Copyable & Sendable>: @unchecked Sendable {
    // @unchecked: `value` is touched only inside `withLock`, under `lock`.
    private let lock = NIOLock()
    private var value: Value

    init(_ value: consuming Value) {
        self.value = value
    }

    /// Runs `body` with the value, exclusively. Never call user code or block in `body`.
    func withLock<Result: ~Copyable, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
