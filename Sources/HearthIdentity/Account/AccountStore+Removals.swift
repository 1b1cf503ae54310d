import Foundation
import HearthCore
import Logging

extension AccountStore {
    /// The file that keeps the device removals of account `id`.
    public func removalsFile(of id: AccountID) -> URL {
        directory.appendingPathComponent("accounts", isDirectory: true)
            .appendingPathComponent(id.hex, isDirectory: true)
            .appendingPathComponent("removals")
    }

    /// The device removals of account `id` in this directory: one instance per file in the
    /// process, shared by every store, engine and TLS context, so that a removal learned by
    /// one is honoured by all at once.
    public func removals(of id: AccountID) throws -> DeviceRemovals {
        let account = try loadAccount(id)
        let file = removalsFile(of: id)
        return RemovalsRegistry.shared.removals(for: file, trust: account.trust)
    }

    /// Removes `device` from account `id`: signs a removal record with the account CA (so it
    /// needs the CA key), saves it before returning, and hands it to every engine of this
    /// process; engines of other processes read the file (they watch it) and every device of
    /// the account learns it from its peers.
    @discardableResult
    public func removeDevice(_ device: DeviceID, named name: String, authority: AccountAuthority, at date: Date = Date()) throws -> DeviceRemoval {
        let removals = try removals(of: authority.account.id)
        let record = try authority.removal(of: device, named: name, at: date)
        removals.merge([record])
        try removals.saveNow()
        return removals.removal(of: device) ?? record
    }
}

/// The process's ``DeviceRemovals`` by file: weakly held, so an account no store uses any more
/// is forgotten.
final class RemovalsRegistry: Sendable {
    static let shared = RemovalsRegistry()

    private final class Weak: @unchecked Sendable {
        // Only read and written under the registry's lock.
        weak var value: DeviceRemovals?
        init(_ value: DeviceRemovals) { self.value = value }
    }

    private let table = Locked<[String: Weak]>([:])

    func removals(for file: URL, trust: AccountTrust) -> DeviceRemovals {
        let key = file.standardizedFileURL.path
        if let existing = table.withLock({ $0[key]?.value }), existing.trust.accountID == trust.accountID { return existing }
        // Read outside the lock (file I/O); a racing caller's instance wins if it got there first.
        let fresh = DeviceRemovals(trust: trust, file: file)
        return table.withLock { t in
            if let existing = t[key]?.value, existing.trust.accountID == trust.accountID { return existing }
            t[key] = Weak(fresh)
            return fresh
        }
    }
}
