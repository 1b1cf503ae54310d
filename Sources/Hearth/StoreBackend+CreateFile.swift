import Foundation

extension UbiquitousKeyValueStore {
    /// Saves the store's file now, even if nothing changed since it was opened, and returns
    /// whether it is on disk. A store opened for the first time has no file until its first
    /// change; `hearth serve` and `hearth watch --create` promise to create the store, so
    /// they call this at start. Apps never need it.
    package func saveCreatingFile() async -> Bool {
        await backend.saveEvenIfUnchanged()
    }

    /// ``synchronize()`` for async code: the same save and push, with the save (an fsync) on the
    /// store's I/O queue rather than a thread of the cooperative pool.
    @discardableResult
    package func synchronizeOffPool() async -> Bool {
        let saved = await backend.flushOffPool()
        backend.syncEngine?.pushNow()
        return saved
    }
}

extension StoreBackend {
    /// See ``UbiquitousKeyValueStore/saveCreatingFile()``: counts as a change, so that the
    /// flush (on the store's I/O queue, off the cooperative pool) writes.
    func saveEvenIfUnchanged() async -> Bool {
        state.withLock { $0.generation &+= 1 }
        return await flushOffPool()
    }
}
