import Foundation
import HearthCore

/// The invariants of account switches and notifications (docs/simulator.md, "Account switches"):
/// nothing written under another account reaches the household, and each app is told the keys
/// whose visible value changed (what the model shows before and after).
///
/// Its own checker because this family is apart from the sync invariants (``Checker``): it reads
/// the household checker's model and device prefixes, and reports through it.
struct AccountChecks: Sendable {
    static let otherAccount = "nothing written under another account reaches the household"

    let checker: Checker

    /// What the model says `device` shows in `store` (``Checker/modelEntries(device:store:)``): live values by key.
    func modelVisible(device: Int, store: String) -> [StoreKey: PropertyListValue] {
        checker.modelEntries(device: device, store: store).compactMapValues(\.value)
    }

    /// The keys whose visible value differs between two views of the model.
    static func changedKeys(_ before: [StoreKey: PropertyListValue], _ after: [StoreKey: PropertyListValue]) -> Set<StoreKey> {
        Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }
    }

    /// No entry of `entries` (held by `device` in the household's `store`) was written under
    /// another account: its origin is a household device's, and its value not one the other
    /// account's writes carry (``AccountSwitches/otherAccountValue(_:)``).
    func checkHousehold(_ entries: some Sequence<Entry>, device: Int, store: String, when: String) {
        let prefixes = checker.prefixes.withLock { $0 }
        for entry in entries where prefixes[entry.origin.devicePrefix] == nil || AccountSwitches.isOtherAccountValue(entry.value) {
            checker.fail(Self.otherAccount, "d\(device) \(store) holds \(Checker.describe(entry)) \(when)")
            return
        }
    }
}
