import Foundation

extension StoreBackend {
    /// See ``StoreInternals/saveCreatingFile()``: counts as a change, so that the flush (on the
    /// store's I/O queue, off the cooperative pool) writes.
    func saveEvenIfUnchanged() async -> Bool {
        state.withLock { $0.generation &+= 1 }
        return await flushOffPool()
    }
}
