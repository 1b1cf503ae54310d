import Foundation
import HearthCore

/// Waits until `condition` (on a `UserDefaults` suite, say) holds, checking it now and again at
/// each `UserDefaults.didChangeNotification` (Foundation posts one for each value set or
/// removed), never on a timer; false if it does not hold by `deadline`, a bound for a failure.
///
/// ```swift
/// let mirror = UserDefaultsMirror(store: cluster[1], suiteName: suite, keys: ["backgroundColor"])
/// #expect(await untilDefaultsChange { mirror.defaults.integer(forKey: "backgroundColor") == 3 })
/// ```
package func untilDefaultsChange(deadline: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
    let changed = ChangeSignal()
    let observer = NotificationCenter.default.addObserver(forName: UserDefaults.didChangeNotification, object: nil, queue: nil) { _ in
        changed.signal()
    }
    defer { NotificationCenter.default.removeObserver(observer) }
    return await ChangeSignal.waitUntil(ContinuousClock.now + deadline, observing: { [changed] }, condition)
}
