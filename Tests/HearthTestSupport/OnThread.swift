import Foundation

/// Runs a blocking call (an `accept`, a `connect`) on a thread of its own and waits for it
/// without blocking the cooperative pool: it has as many threads as cores (two here), and a
/// test blocking one starves every other test's tasks.
package func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in Thread.detachNewThread { continuation.resume(returning: body()) } }
}
