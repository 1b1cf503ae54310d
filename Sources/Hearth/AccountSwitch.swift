import Foundation
import HearthCore
import Logging

/// What an account switch makes of a store's local set, and what it tells the app: the one
/// decision of ``StoreSync/switchAccount(_:to:settings:)``, apart from its stops, saves and
/// file I/O, so that the household simulator drives the same code on its virtual clock
/// (docs/simulator.md, "Account switches").
package enum AccountSwitch {
    /// Puts the other account's replica (`opened`, from its file) in `replica`'s place and
    /// returns the notification Apple's semantics promise: `accountChange` with every key whose
    /// visible value differs (nil when none does).
    ///
    /// - `signingIn` (from signed out to an account): the signed-out writes are merged into
    ///   `opened` by last-writer-wins, or dropped with `discardSignedOutWrites`, and become
    ///   `device`'s writes in the account.
    /// - Otherwise (between accounts, or signing out): the set is `opened`'s, wholesale,
    ///   whatever the timestamps; nothing of the account left behind comes along.
    package static func replace(_ replica: inout SyncedReplica, with opened: Replica, signingIn: Bool, discardSignedOutWrites: Bool,
                                device: Data?, wall: () -> UInt64, logger: Logger) -> ChangeEvent? {
        let before = replica.visibleValues
        var next = opened
        if signingIn {
            if discardSignedOutWrites {
                if !replica.entries.isEmpty { logger.notice("discarding \(replica.usage.keys) keys written while signed out") }
            } else {
                for entry in replica.entries.values { next.merge(entry, wall: wall()) }
                // The signed-out writes become this device's writes in the account.
                if let device { next.adoptUnboundEntries(of: device) }
            }
        }
        let changed = AttachedStore.changedKeys(before, next.visibleValues)
        replica.replace(with: next)
        return changed.isEmpty ? nil : ChangeEvent(reason: .accountChange, keys: changed.map(\.string))
    }
}
