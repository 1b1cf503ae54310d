import Foundation
import HearthCore

/// The invariants of account switches and notifications (docs/simulator.md, "Account switches").
extension Checker {
    static let otherAccount = "nothing written under another account reaches the household"

    /// What the model says `device` shows in `store` (``modelEntries(device:store:)``): live values by key.
    func modelVisible(device: Int, store: String) -> [StoreKey: PropertyListValue] {
        modelEntries(device: device, store: store).compactMapValues(\.value)
    }

    /// The keys whose visible value differs between two views of the model.
    static func changedKeys(_ before: [StoreKey: PropertyListValue], _ after: [StoreKey: PropertyListValue]) -> Set<StoreKey> {
        Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }
    }

    /// No entry of `entries` (held by `device` in the household's `store`) was written under
    /// another account: its origin is a household device's, and its value not one the other
    /// account's writes carry (``Household/otherAccountValue(_:)``).
    func checkHousehold(_ entries: some Sequence<Entry>, device: Int, store: String, when: String) {
        let prefixes = prefixes.withLock { $0 }
        for entry in entries where prefixes[entry.origin.devicePrefix] == nil || Household.isOtherAccountValue(entry.value) {
            fail(Self.otherAccount, "d\(device) \(store) holds \(Self.describe(entry)) \(when)")
            return
        }
    }
}
