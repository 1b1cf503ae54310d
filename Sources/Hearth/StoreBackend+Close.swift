import Foundation
import HearthCore

extension StoreBackend {
    /// See ``StoreInternals/close()``.
    func close() async {
        // Attached: the host gets what is pending, then the connection closes for good.
        _ = try? await onIOQueue { [self] in detach(synchronize: true) }
        // Hosting: attached processes take over once the lock is released below.
        stopHosting()
        stopWatchingAccount()
        await stopSync()
        await flushOffPool()
        // The sync engine may hold this backend a little longer; dropping the storage here
        // releases the flock now rather than when the last reference goes.
        let storage = state.withLock { s -> ReplicaStorage? in
            defer { s.storage = nil }
            return s.storage
        }
        _ = storage
        sync.owner?.stores.forget(self)
    }
}
