import Hearth
import HearthCore
import Synchronization
import Testing

/// Records a store's change events as they come, for tests to wait on with a timeout.
final class EventLog: Sendable {
    private let task: Task<Void, Never>

    init(_ store: UbiquitousKeyValueStore) {
        let stream = store.changes
        let box = EventBox()
        task = Task {
            for await event in stream {
                box.append(event)
                box.arrivals.signal()
            }
        }
        self.box = box
    }

    private let box: EventBox

    deinit { task.cancel() }

    /// The next unconsumed event with `reason` (earlier ones of other reasons are skipped),
    /// waiting up to `timeout`.
    func next(_ reason: ChangeReason, timeout: Duration = .seconds(30)) async -> ChangeEvent? {
        // Woken by each event recorded (no polling).
        var found: ChangeEvent?
        _ = await ChangeSignal.waitUntil(ContinuousClock.now + timeout, observing: { [box.arrivals] }) {
            found = box.take(reason)
            return found != nil
        }
        if let found { return found }
        Issue.record("no \(reason) event within \(timeout)")
        return nil
    }

    var all: [ChangeEvent] { box.all }
}

final class EventBox: Sendable {
    /// Signalled after each event appended.
    let arrivals = ChangeSignal()
    private let state = Mutex<(events: [ChangeEvent], next: Int)>(([], 0))
    func append(_ event: ChangeEvent) { state.withLock { $0.events.append(event) } }
    var all: [ChangeEvent] { state.withLock { $0.events } }
    func take(_ reason: ChangeReason) -> ChangeEvent? {
        state.withLock { s in
            while s.next < s.events.count {
                let event = s.events[s.next]
                s.next += 1
                if event.reason == reason { return event }
            }
            return nil
        }
    }
}
