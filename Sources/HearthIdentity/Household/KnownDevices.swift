import Dispatch
import Foundation
import HearthCore
import Logging

/// The devices of one account this device has met or heard of: what `hearth device list`
/// shows and `hearth device remove NAME` resolves names against.
///
/// The sync engine notes each peer when its connection starts and ends (its certificate and
/// when it was last seen) and each device whose certificate came with relayed entries. Kept in
/// `accounts/<id>/devices`; saves happen off the caller's thread right after the change (so a
/// connection's save is over by the time it is idle), notes made meanwhile are coalesced into
/// it, and nothing is written while no connection comes or goes.
package final class KnownDevices: Sendable {
    /// One device as known here.
    package struct Device: Sendable, Hashable {
        package let id: DeviceID
        package var name: String
        /// Its latest certificate (DER): a renewed one replaces an older one.
        package var certificate: [UInt8]
        /// When a connection with it last started or ended, in milliseconds since 1970; nil for a
        /// device known only from the certificates that came with its entries.
        package var lastSeen: UInt64?
        /// When its certificate expires.
        package var expires: Date

        package var lastSeenDate: Date? { lastSeen.map { Date(timeIntervalSince1970: Double($0) / 1000) } }
    }

    /// The file's last-seen times are updated only when they are at least this old (ms).
    static let lastSeenResolution: UInt64 = 600_000

    /// At most this many devices are kept (more are not recorded; nothing depends on the list).
    package static let maximumDevices = 1024

    package let trust: AccountTrust
    package let file: URL?
    private let devices = Locked<[DeviceID: Device]>([:])
    private let saveScheduled = Locked(false)
    private let saver = DispatchQueue(label: "hearth.identity.devices")
    private let logger: Logger

    package init(trust: AccountTrust, file: URL? = nil, logger: Logger) {
        self.trust = trust
        self.file = file
        self.logger = logger
        if let file {
            do {
                let onDisk = Self.devices(in: try AccountRecordFile(url: file).read(), trust: trust)
                devices.withLock { $0 = onDisk }
            } catch {
                logger.error("cannot read the known devices: \(error); starting with none (the file is rewritten)")
            }
        }
    }

    /// Every device known here, by name then ID.
    package var all: [Device] {
        devices.withLock { Array($0.values) }.sorted { ($0.name, $0.id) < ($1.name, $1.id) }
    }

    package func device(_ id: DeviceID) -> Device? { devices.withLock { $0[id] } }

    /// Notes `certificate` (verified against the account CA here) and, with `seen`, that its
    /// device was connected just now.
    package func note(_ certificate: Certificate, seen: Bool) {
        guard let id = try? trust.validateIssued(certificate) else { return }
        let now = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
        let changed = devices.withLock { table -> Bool in
            let known = table[id]
            guard known != nil || table.count < Self.maximumDevices else { return false }
            var device = known ?? Device(id: id, name: certificate.commonName ?? "", certificate: certificate.derEncoded,
                                         lastSeen: nil, expires: certificate.notValidAfter)
            var worthSaving = known == nil
            if certificate.notValidAfter > device.expires {
                device.certificate = certificate.derEncoded
                device.expires = certificate.notValidAfter
                device.name = certificate.commonName ?? device.name
                worthSaving = true
            }
            if seen {
                // A link that drops and comes back (or two connections meeting, one kept) is not
                // worth a write each time: the file's "last seen" is precise to ten minutes.
                if device.lastSeen.map({ now >= $0 + Self.lastSeenResolution }) ?? true { worthSaving = true }
                device.lastSeen = now
            }
            table[id] = device
            return worthSaving
        }
        if changed { scheduleSave() }
    }

    /// Waits for the saves asked for so far.
    package func flush() { saver.sync {} }

    private func scheduleSave() {
        guard file != nil, saveScheduled.withLock({ s in defer { s = true }; return !s }) else { return }
        saver.async { [self] in save() }
    }

    private func save() {
        guard let file else { return }
        saveScheduled.withLock { $0 = false }
        let held = devices.withLock { $0 }
        do {
            try AccountRecordFile(url: file).update { onDisk in
                var merged = Self.devices(in: onDisk, trust: trust)
                for (id, device) in held {
                    guard var kept = merged[id] else { merged[id] = device; continue }
                    if device.expires > kept.expires { kept.certificate = device.certificate; kept.expires = device.expires; kept.name = device.name }
                    kept.lastSeen = [kept.lastSeen, device.lastSeen].compactMap { $0 }.max()
                    merged[id] = kept
                }
                return ["version": 1, "devices": .array(merged.values.sorted { $0.id < $1.id }.map { device in
                    var fields: [String: PropertyListValue] = ["certificate": .data(Data(device.certificate))]
                    if let seen = device.lastSeen { fields["lastSeen"] = .integer(Int64(clamping: seen)) }
                    return .dictionary(fields)
                })]
            }
        } catch {
            logger.error("cannot save the known devices: \(error)")
        }
    }

    /// The devices a document lists whose certificate chains to the account CA (a planted one is
    /// ignored; expired ones stay, to be shown as such).
    static func devices(in document: PropertyListValue?, trust: AccountTrust) -> [DeviceID: Device] {
        var result: [DeviceID: Device] = [:]
        for item in (document?.dictionaryValue?["devices"]?.arrayValue ?? []).prefix(maximumDevices) {
            guard let fields = item.dictionaryValue, let der = fields["certificate"]?.dataValue,
                  let certificate = try? Certificate(derEncoded: der),
                  let id = try? trust.validateIssued(certificate) else { continue }
            let seen = fields["lastSeen"]?.integerValue.flatMap { $0 >= 0 ? UInt64($0) : nil }
            result[id] = Device(id: id, name: certificate.commonName ?? "", certificate: Array(der), lastSeen: seen,
                                expires: certificate.notValidAfter)
        }
        return result
    }
}
