import Dispatch
import Foundation
import HearthCore

/// A store's saves: write-behind (the replica saved within ``delay`` of its first unsaved change,
/// on the store's I/O queue, or at its virtual time in the simulator), one save at a time, and
/// a failed save tried again 5 s later rather than the change lost. Its ``StoreBackend`` owns
/// one: what is saved (the replica, its generation, its file) is the store's, behind the store's
/// lock; what is kept here is the saves' own: the queue, the scheduler, the generation on disk.
final class WriteBehind: Sendable {
    let delay: Duration
    /// Where the store's blocking file work runs (saves with fsync, opening another file):
    /// never on the cooperative thread pool, where it would stall every task of the app.
    let ioQueue: DispatchQueue
    /// Runs a delayed save (write-behind, a retry): nil, on ``ioQueue`` after the delay; a
    /// simulator's runs it at its virtual time (``HearthDevice/init(_:disk:eventLoopGroup:saveScheduler:)``).
    private let scheduler: SaveScheduler?
    /// Serialises saves; holds the generation known to be on disk.
    private let savedGeneration = Locked<UInt64>(0)

    init(storeIdentifier: String, delay: Duration, scheduler: SaveScheduler?) {
        self.delay = delay
        self.scheduler = scheduler
        ioQueue = DispatchQueue(label: "hearth.store.io.\(storeIdentifier)", qos: .utility)
    }

    /// Runs blocking file work on ``ioQueue`` and waits for it without blocking a thread.
    func onIOQueue<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            ioQueue.async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Saves `backend` within ``delay`` of the first unsaved change.
    func scheduleWriteBehind(of backend: StoreBackend) {
        guard backend.isPersistent else { return }
        // Weak: a store the app has let go of is saved by its deinit instead.
        saveLater(backend, after: delay)
    }

    /// Saves `backend` after `delay` (``scheduler``, else on ``ioQueue``), unless the store is gone by then.
    private func saveLater(_ backend: StoreBackend, after delay: Duration) {
        let save: @Sendable () -> Void = { [weak backend] in _ = backend?.flush() }
        if let scheduler { return scheduler(delay, save) }
        ioQueue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay.nanoseconds)), execute: save)
    }

    /// Saves `backend`'s replica if it changed since the last save (a store with a file of its
    /// own: ``StoreBackend/flush()``). Returns whether the disk now holds every change made
    /// before the call.
    func save(_ backend: StoreBackend) -> Bool {
        guard backend.isPersistent else { return false }
        return savedGeneration.withLock { saved in
            let (snapshot, generation, storage, applied, host) = backend.state.withLock { s in
                s.flushScheduled = false
                return (s.replica.replica, s.generation, s.storage, s.attachedApplied, s.localHost)
            }
            guard generation != saved, let storage else { return true }
            do {
                try storage.save(snapshot)
                saved = generation
                // Unless another account's file took its place meanwhile.
                backend.state.withLock { s in if s.storage === storage { s.savedVector = snapshot.vector } }
                // What attached processes wrote before the snapshot is on disk now.
                if let host, !applied.isEmpty { host.saved(applied) }
                return true
            } catch {
                backend.logger.error("could not save the store", metadata: ["store": "\(backend.storeIdentifier)", "error": "\(error)"])
                // Try again later rather than lose the change.
                backend.state.withLock { $0.flushScheduled = true }
                saveLater(backend, after: .seconds(5))
                return false
            }
        }
    }
}
