import Hearth
import HearthCore

/// What each replica of a ``LoopbackCluster`` has posted: its change events in order, kept
/// across its restarts by one recording task per open store, and how many of them
/// ``LoopbackCluster/nextNotification(on:reason:timeout:)`` has consumed.
final class NotificationRecorder: Sendable {
    private struct Log {
        var events: [[ChangeEvent]]
        /// Per replica, how many events ``LoopbackCluster/nextNotification(on:reason:timeout:)`` has consumed.
        var consumed: [Int]
        var tasks: [Task<Void, Never>?]
    }

    private let log: Locked<Log>
    /// Signalled at each event recorded: what the cluster's waits for a notification follow.
    private let recorded: ChangeSignal

    init(replicas: Int, signal: ChangeSignal) {
        log = Locked(Log(events: Array(repeating: [], count: replicas), consumed: Array(repeating: 0, count: replicas),
                         tasks: Array(repeating: nil, count: replicas)))
        recorded = signal
    }

    /// Records the events of `store`, replica `index`'s store from now on.
    func record(_ store: UbiquitousKeyValueStore, as index: Int) {
        let changes = store.changes
        let task = Task { [weak self] in
            for await event in changes {
                guard let self else { return }
                self.log.withLock { $0.events[index].append(event) }
                self.recorded.signal()
            }
        }
        log.withLock { $0.tasks[index] = task }
    }

    /// Stops recording replica `index` (it is about to close).
    func stop(_ index: Int) {
        log.withLock { $0.tasks[index] }?.cancel()
    }

    func stopAll() {
        for task in log.withLock({ $0.tasks }) { task?.cancel() }
    }

    func events(of index: Int) -> [ChangeEvent] {
        log.withLock { $0.events[index] }
    }

    /// The next event of replica `index` with `reason` not consumed yet; the events before it
    /// with other reasons are consumed too.
    func consumeNext(of index: Int, reason: ChangeReason) -> ChangeEvent? {
        log.withLock { l -> ChangeEvent? in
            while l.consumed[index] < l.events[index].count {
                let event = l.events[index][l.consumed[index]]
                l.consumed[index] += 1
                if event.reason == reason { return event }
            }
            return nil
        }
    }
}
