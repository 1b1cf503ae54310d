import Dispatch
import HearthCore

/// Whether a store's last release has finished putting its writes out.
///
/// A store's deinit runs on whichever thread drops the last reference, and that is not always
/// the app's: an event loop handling an answer of the host, or a write-behind save, holds the
/// store for a moment, and if the app lets go meanwhile, the deinit runs there. On an event
/// loop an attached store cannot wait for its last writes to reach the socket (they leave from
/// that loop after the deinit returns). The exit hook (``StoreTable/flushAll()``) and a device's stop no longer
/// sees such a store, so it waits for this instead: `store = nil; exit(0)` loses no write
/// whichever thread ran the deinit.
final class StoreRelease: Sendable {
    private let group = DispatchGroup()
    private let finished = Locked(false)

    init() {
        group.enter()
    }

    /// The store's writes are out (on disk, or in the host's socket). Idempotent.
    func finish() {
        let first = finished.withLock { done in
            defer { done = true }
            return !done
        }
        if first { group.leave() }
    }

    var isFinished: Bool { finished.withLock { $0 } }

    /// Waits until ``finish()`` or `deadline`; true if finished.
    func wait(until deadline: DispatchTime) -> Bool {
        group.wait(timeout: deadline) == .success
    }
}
