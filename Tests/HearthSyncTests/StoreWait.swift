@testable import Hearth
import HearthCore

extension UbiquitousKeyValueStore {
    /// What this store's sync announces its changes on: the store's own signal (its engine
    /// started or stopped) and its engine's (a session came or went, a message was handled,
    /// heartbeats included), on any network, TLS too.
    var syncSignals: [ChangeSignal] { [backend.syncChanges] + (backend.syncEngine?.changes.map { [$0] } ?? []) }

    /// Waits until `condition` holds, checking it now and again at each change one of
    /// `stores`' sync signals (``syncSignals``), never on a timer; false if it does not hold by
    /// `deadline`, a bound for a failure.
    static func until(_ stores: [UbiquitousKeyValueStore], deadline: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
        await ChangeSignal.waitUntil(ContinuousClock.now + deadline, observing: { stores.flatMap(\.internals.syncSignals) }, condition)
    }
}
