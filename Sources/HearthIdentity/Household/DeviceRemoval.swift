import Foundation
import HearthCore

/// A record, signed by the account CA, that a device no longer belongs to the account.
///
/// Made by ``AccountAuthority/removal(of:named:at:)`` on the device where the owner
/// removes it (`hearth device remove`, which needs the account passphrase); synced to every
/// device of the account by the sync protocol (docs/protocol.md, "Device removals") and kept
/// there for good. Every device honours it at once: TLS handshakes with the removed device
/// fail, its connections close, and entries it signs with a timestamp after ``removedAt``
/// are refused. Entries it wrote before stay.
///
/// ```swift
/// let removal = try authority.removal(of: phone.deviceID, named: "phone")
/// try removals.merge([removal])            // persisted, relayed to every peer
/// removals.isRemoved(phone.deviceID)       // true, here and soon on every device
/// ```
package struct DeviceRemoval: Sendable, Hashable, CustomStringConvertible {
    /// The account the device is removed from.
    package let account: AccountID
    /// The removed device.
    package let device: DeviceID
    /// Its name when it was removed (for people; not verified against anything).
    package let deviceName: String
    /// When it was removed, in milliseconds since 1970 on the remover's clock: entries the
    /// device signs with a later timestamp are refused.
    package let removedAt: UInt64
    /// The account CA's Ed25519 signature over ``signingBytes``.
    package let signature: Data

    /// A device name in a record is at most this many bytes of UTF-8.
    package static let maximumNameBytes = 256

    /// Wraps the fields of a record without checking the signature (see ``verify(with:)``).
    package init(account: AccountID, device: DeviceID, deviceName: String, removedAt: UInt64, signature: Data) {
        self.account = account
        self.device = device
        self.deviceName = deviceName
        self.removedAt = removedAt
        self.signature = signature
    }

    /// `"hearth-removal-v1" 00 · account (32) · device (32) · u64 removedAt · name` (the name as
    /// u32 length + UTF-8).
    package var signingBytes: [UInt8] {
        Self.signingBytes(account: account, device: device, deviceName: deviceName, removedAt: removedAt)
    }

    static func signingBytes(account: AccountID, device: DeviceID, deviceName: String, removedAt: UInt64) -> [UInt8] {
        var w = CanonicalWriter(capacity: 96 + deviceName.utf8.count)
        w.writeBytes(Array("hearth-removal-v1".utf8) + [0])
        w.writeBytes(account.bytes)
        w.writeBytes(device.bytes)
        w.writeUInt64(removedAt)
        w.writeString(deviceName)
        return w.bytes
    }

    /// Checks that the account CA of `trust` signed this record for its own account.
    ///
    /// - Throws: ``IdentityError/Code/badSignature`` when it did not.
    package func verify(with trust: AccountTrust) throws {
        guard account == trust.accountID else {
            throw IdentityError.badSignature("the removal of \(device.short) is for \(account), not \(trust.accountID)")
        }
        guard let key = trust.caCertificate.publicKey, key.isValidSignature(signature, for: signingBytes) else {
            throw IdentityError.badSignature("the removal of \(device.short) is not signed by the account CA")
        }
    }

    /// When the device was removed.
    package var date: Date { Date(timeIntervalSince1970: Double(removedAt) / 1000) }

    package var description: String { "removal of \(deviceName.isEmpty ? "" : "\(deviceName) ")(\(device.short)) at \(date)" }

    /// Of two records of the same device (removed on two devices before they heard of each
    /// other), the one every device keeps: the earlier, then the smaller signature. The choice
    /// depends on the records only, so every device ends up with the same one.
    package static func preferred(_ a: DeviceRemoval, _ b: DeviceRemoval) -> DeviceRemoval {
        if a.removedAt != b.removedAt { return a.removedAt < b.removedAt ? a : b }
        return a.signature.lexicographicallyPrecedes(b.signature) ? a : b
    }
}

extension DeviceRemoval {
    /// `{account, device, name, at, signature}`, as the `removals` message and the removals
    /// file carry it.
    package var propertyList: PropertyListValue {
        ["account": .data(Data(account.bytes)), "device": .data(device.data), "name": .string(deviceName),
         "at": .integer(Int64(clamping: removedAt)), "signature": .data(signature)]
    }

    /// Reads a record; nil when a field is missing or malformed (its signature is not checked).
    package init?(propertyList value: PropertyListValue) {
        guard let fields = value.dictionaryValue,
              let accountBytes = fields["account"]?.dataValue, let account = KeyHash(bytes: accountBytes).map(AccountID.init(hash:)),
              let deviceBytes = fields["device"]?.dataValue, let device = DeviceID(bytes: deviceBytes),
              let name = fields["name"]?.stringValue, name.utf8.count <= Self.maximumNameBytes,
              let at = fields["at"]?.integerValue, at >= 0,
              let signature = fields["signature"]?.dataValue, signature.count == 64 else { return nil }
        self.init(account: account, device: device, deviceName: name, removedAt: UInt64(at), signature: signature)
    }
}

extension AccountAuthority {
    /// A removal record of `device`, signed by the account CA, dated `date`.
    package func removal(of device: DeviceID, named name: String, at date: Date = Date()) throws -> DeviceRemoval {
        let name = String(decoding: Array(name.utf8).prefix(DeviceRemoval.maximumNameBytes), as: UTF8.self)
        let at = UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded(.down)))
        let bytes = DeviceRemoval.signingBytes(account: account.id, device: device, deviceName: name, removedAt: at)
        let signature = try privateKey.signature(for: bytes)
        return DeviceRemoval(account: account.id, device: device, deviceName: name, removedAt: at, signature: Data(signature))
    }
}
