import Dispatch
import Foundation
import HearthCore

/// The notification fan-out of one store in this process: who is told of a change (every live
/// ``UbiquitousKeyValueStore`` instance, by `didChangeExternallyNotification`, and every
/// ``UbiquitousKeyValueStore/changes`` sequence), and the serial queue that tells them.
///
/// Its own lock, apart from the replica's: who listens has nothing to do with what the replica
/// holds, and a delivery reads the listeners without holding up a writer.
package final class ChangeFanOut: Sendable {
    private struct Listeners {
        var instances: [ObjectIdentifier: WeakStore] = [:]
        var streams: [UInt64: AsyncStream<ChangeEvent>.Continuation] = [:]
        var nextStreamID: UInt64 = 0
    }

    private struct WeakStore {
        weak var store: UbiquitousKeyValueStore?
    }

    private let listeners = Locked(Listeners())
    /// Delivers notifications in order, never on the writer's stack (as Apple's daemon does):
    /// a serial queue of its own, or the scheduler it was given.
    private let schedule: @Sendable (@escaping @Sendable () -> Void) -> Void

    /// `schedule` runs each delivery later, in the order given (the household simulator's
    /// virtual clock); by default a serial `DispatchQueue` of the store's.
    package init(storeIdentifier: String, schedule: (@Sendable (@escaping @Sendable () -> Void) -> Void)? = nil) {
        if let schedule {
            self.schedule = schedule
        } else {
            let queue = DispatchQueue(label: "hearth.store.notify.\(storeIdentifier)")
            self.schedule = { queue.async(execute: $0) }
        }
    }

    func register(_ store: UbiquitousKeyValueStore) {
        listeners.withLock { l in
            l.instances = l.instances.filter { $0.value.store != nil }
            l.instances[ObjectIdentifier(store)] = WeakStore(store: store)
        }
    }

    /// Posts nothing for `store` any more (``StoreInternals/stopPostingNotifications()``).
    func unregister(_ store: UbiquitousKeyValueStore) {
        listeners.withLock { _ = $0.instances.removeValue(forKey: ObjectIdentifier(store)) }
    }

    package func makeStream() -> AsyncStream<ChangeEvent> {
        let (stream, continuation) = AsyncStream<ChangeEvent>.makeStream(bufferingPolicy: .unbounded)
        let id = listeners.withLock { l in
            l.nextStreamID += 1
            l.streams[l.nextStreamID] = continuation
            return l.nextStreamID
        }
        continuation.onTermination = { [weak self] _ in
            self?.listeners.withLock { _ = $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Tells every listener of `event`, asynchronously and in order.
    package func post(_ event: ChangeEvent) {
        // Nobody to tell in this process (the device daemon): no hop to the notify queue.
        guard listeners.withLock({ !$0.instances.isEmpty || !$0.streams.isEmpty }) else { return }
        schedule { [self] in deliver(event) }
    }

    private func deliver(_ event: ChangeEvent) {
        let (stores, streams) = listeners.withLock { l in
            (l.instances.values.compactMap(\.store), Array(l.streams.values))
        }
        let userInfo: [AnyHashable: Any] = [
            NSUbiquitousKeyValueStoreChangeReasonKey: event.reason.rawValue,
            NSUbiquitousKeyValueStoreChangedKeysKey: event.keys,
        ]
        for store in stores {
            NotificationCenter.default.post(name: UbiquitousKeyValueStore.didChangeExternallyNotification,
                                            object: store, userInfo: userInfo)
        }
        for continuation in streams { continuation.yield(event) }
    }
}
