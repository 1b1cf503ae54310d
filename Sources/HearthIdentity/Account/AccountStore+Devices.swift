import Foundation
import HearthCore
import Logging

extension AccountStore {
    /// The file that keeps the device removals of account `id`.
    package func removalsFile(of id: AccountID) -> URL {
        files.removalsFile(of: id)
    }

    /// The device removals of account `id` in this directory: one instance per file in
    /// ``records`` (the device's), shared by every store, engine and TLS context of the device,
    /// so that a removal learned by one is honoured by all at once.
    package func removals(of id: AccountID) throws -> DeviceRemovals {
        let account = try loadAccount(id)
        let file = removalsFile(of: id)
        return records.removals(for: file, trust: account.trust, logger: logger)
    }

    /// The file that keeps the devices of account `id` met on this device.
    package func knownDevicesFile(of id: AccountID) -> URL {
        files.knownDevicesFile(of: id)
    }

    /// The devices of account `id` met on this device (one instance in ``records``, like ``removals(of:)``).
    package func knownDevices(of id: AccountID) throws -> KnownDevices {
        let account = try loadAccount(id)
        return records.devices(for: knownDevicesFile(of: id), trust: account.trust, logger: logger)
    }

    /// Saves a renewed certificate of this device in account `id` (atomically; the key stays).
    ///
    /// - Throws: ``IdentityError/Code/invalidKey`` when it is not for this device's key, or
    ///   ``IdentityError/Code/certificateRejected`` when the account CA did not issue it.
    package func replaceDeviceCertificate(_ certificate: Certificate, of id: AccountID) throws {
        let current = try loadIdentity(id)
        _ = try DeviceIdentity(account: current.account, privateKey: current.privateKey, certificate: certificate)
        try current.account.trust.validateDevice(certificate)
        try files.writeDeviceCertificate(certificate, of: id)
    }

    /// Removes `device` from account `id`: signs a removal record with the account CA (so it
    /// needs the CA key), saves it before returning, and hands it to every engine of this
    /// process; engines of other processes read the file (they watch it) and every device of
    /// the account learns it from its peers.
    @discardableResult
    package func removeDevice(_ device: DeviceID, named name: String, authority: AccountAuthority, at date: Date = Date()) throws -> DeviceRemoval {
        let removals = try removals(of: authority.account.id)
        let record = try authority.removal(of: device, named: name, at: date)
        removals.merge([record])
        try removals.saveNow()
        return removals.removal(of: device) ?? record
    }
}

/// One device's ``DeviceRemovals`` and ``KnownDevices`` by file: weakly held, so an account
/// no store uses any more is forgotten. A device owns one (Hearth's `HearthDevice`) and
/// passes it in its ``AccountStore``s; two devices in one process share none.
package final class HouseholdRecords: Sendable {
    package init() {}

    private final class WeakBox: @unchecked Sendable {
        // Only read and written under the registry's lock.
        weak var value: AnyObject?
        init(_ value: AnyObject) { self.value = value }
    }

    private let table = Locked<[String: WeakBox]>([:])

    func removals(for file: URL, trust: AccountTrust, logger: Logger) -> DeviceRemovals {
        shared(file) { DeviceRemovals(trust: trust, file: file, logger: logger) }
    }

    func devices(for file: URL, trust: AccountTrust, logger: Logger) -> KnownDevices {
        shared(file) { KnownDevices(trust: trust, file: file, logger: logger) }
    }

    /// The live instance for `file`, or a new one made by `make` (outside the lock: it reads the
    /// file); a racing caller's instance wins if it got there first. A file path names one
    /// account, so one type and one trust.
    private func shared<Value: AnyObject>(_ file: URL, _ make: () -> Value) -> Value {
        let key = file.standardizedFileURL.path
        if let existing = table.withLock({ $0[key]?.value }) as? Value { return existing }
        let fresh = make()
        return table.withLock { t in
            if let existing = t[key]?.value as? Value { return existing }
            t[key] = WeakBox(fresh)
            return fresh
        }
    }
}
