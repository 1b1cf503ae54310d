import ArgumentParser
import Foundation
import HearthCore
import HearthDaemon
import HearthIdentity

/// `hearth device …`: the devices of the signed-in account.
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "List the devices of the signed-in account, approve a new one (pairing), or remove one (a lost or sold device).",
        subcommands: [List.self, Approve.self, Remove.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Every device of the account known here: name, ID, fingerprint, last seen, certificate expiry, removed or not.",
            discussion: """
                Devices are known here once this device has synced with them, or received entries they signed. \
                "last seen" is when a connection with the device last started or ended on this device. With --json, \
                each device's certificate expiry ("expires") and the start of its renewal window ("renewalFrom": from then \
                on it asks its peers for a renewed certificate; see --renewal-window of hearth daemon).
                """)
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print JSON for scripts.") var json = false
        @Option(name: .customLong("renewal-window"), help: ArgumentHelp(
            "The renewal window, in days, \"renewalFrom\" is computed with (default: $HEARTH_RENEWAL_WINDOW_DAYS, else 90).", valueName: "days"))
        var renewalWindowDays: Int?

        func run() async throws {
            guard let identity = try global.currentIdentity() else {
                throw CommandError(.notSignedIn, "not signed in: create or join an account first (hearth account create)")
            }
            let rows = try DeviceCommand.rows(identity: identity, accounts: global.accounts)
            if json {
                let window = TimeInterval(PeerOptions.renewalWindowDays(renewalWindowDays) * 86_400)
                emit("[" + rows.map { $0.json(renewalWindow: window) }.joined(separator: ",") + "]")
                return
            }
            let removals = try identityCall { try global.accounts.removals(of: identity.account.id) }
            if let notice = removals.notice {
                emit("warning: \(notice)")
            } else if removals.isRemoved(identity.deviceID) {
                emit("warning: this device was removed from the account; no device syncs with it")
            }
            emit(Row.header)
            for row in rows { emit(row.line) }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a device from the account (needs the account passphrase); every device refuses it from then on.",
            discussion: """
                The removal is a record signed with the account key. It is saved here and handed to this device's \
                sync (the daemon or a running app), which sends it to every device it syncs with; each of them \
                passes it on. From then on every device that has it refuses the removed device's connections and \
                the entries it signs after the removal; what it wrote before stays. A removal cannot be undone: \
                a device removed by mistake joins again (with a new device key).
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The device's name, or its ID (or at least its first 8 hex digits), as 'hearth device list' shows them.")
        var device: String
        @OptionGroup var secret: PassphraseOptions
        @Flag(help: "Print JSON for scripts.") var json = false

        func run() async throws {
            guard let identity = try global.currentIdentity() else {
                throw CommandError(.notSignedIn, "not signed in: create or join an account first (hearth account create)")
            }
            let accounts = global.accounts
            let rows = try DeviceCommand.rows(identity: identity, accounts: accounts)
            let target = try DeviceCommand.resolve(device, among: rows)
            guard target.id != identity.deviceID else {
                throw CommandError(.usage, "\(target.name) is this device; to leave the account here, use hearth account sign-out")
            }
            let removals = try identityCall { try accounts.removals(of: identity.account.id) }
            if let existing = removals.removal(of: target.id) {
                note("\(target.name.isEmpty ? target.id.short : target.name) was already removed (\(existing.date))")
                if json { emit(DeviceCommand.json(existing)) }
                return
            }
            let passphrase = try secret.resolvedPassphrase()
            let authority = try identityCall(wrongPassphrase: AccountCommand.wrongAccountPassphrase) {
                try accounts.loadAuthority(identity.account.id, passphrase: passphrase)
            }
            let record = try identityCall { try accounts.removeDevice(target.id, named: target.name, authority: authority) }
            if json {
                emit(DeviceCommand.json(record))
            } else {
                emit("removed \(target.name.isEmpty ? "device" : target.name) (\(target.id.short)) from \(identity.account.displayName)")
                emit("this device's sync (the daemon or a running app) tells every device it reaches; each passes it on")
            }
        }
    }

    /// One device as `list` shows it.
    struct Row {
        let id: DeviceID
        let name: String
        let isThisDevice: Bool
        let lastSeen: Date?
        let expires: Date?
        let removed: DeviceRemoval?

        static let header = "NAME                 ID        LAST SEEN             EXPIRES      STATUS                      FINGERPRINT"

        var line: String {
            func pad(_ text: String, _ width: Int) -> String { text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count) }
            let status = removed.map { "removed \(Row.format($0.date))" } ?? (isThisDevice ? "this device" : expires.map { $0 < Date() ? "certificate expired" : "member" } ?? "member")
            // The fingerprint last: what two people read aloud to compare devices.
            return pad(name.isEmpty ? "?" : name, 21) + pad(id.short, 10) + pad(isThisDevice ? "now" : lastSeen.map(Row.format) ?? "never", 22)
                + pad(expires.map { Row.day($0) } ?? "?", 13) + pad(status, 28) + id.fingerprint
        }

        func json(renewalWindow: TimeInterval) -> String {
            var fields = ["\"id\":\"\(id.hex)\"", "\"name\":\(PropertyListJSON.quote(name))", "\"fingerprint\":\"\(id.fingerprint)\"",
                          "\"thisDevice\":\(isThisDevice)"]
            fields.append("\"lastSeen\":" + (lastSeen.map { "\"\(Row.iso($0))\"" } ?? "null"))
            fields.append("\"expires\":" + (expires.map { "\"\(Row.iso($0))\"" } ?? "null"))
            fields.append("\"renewalFrom\":" + (expires.map { "\"\(Row.iso($0.addingTimeInterval(-renewalWindow)))\"" } ?? "null"))
            fields.append("\"removed\":" + (removed.map { "\"\(Row.iso($0.date))\"" } ?? "null"))
            return "{" + fields.joined(separator: ",") + "}"
        }

        static func iso(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }
        static func format(_ date: Date) -> String {
            let formatter = DateFormatter()
            formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
            return formatter.string(from: date)
        }
        static func day(_ date: Date) -> String {
            let formatter = DateFormatter()
            formatter.dateFormat = "yyyy-MM-dd"
            return formatter.string(from: date)
        }
    }

    /// This device, every device met here, and every removed one, each once.
    static func rows(identity: DeviceIdentity, accounts: AccountStore) throws -> [Row] {
        let (known, removals) = try identityCall {
            (try accounts.knownDevices(of: identity.account.id), try accounts.removals(of: identity.account.id))
        }
        var rows = [Row(id: identity.deviceID, name: identity.deviceName, isThisDevice: true, lastSeen: nil,
                        expires: identity.certificate.notValidAfter, removed: removals.removal(of: identity.deviceID))]
        for device in known.all where device.id != identity.deviceID {
            rows.append(Row(id: device.id, name: device.name, isThisDevice: false, lastSeen: device.lastSeenDate,
                            expires: device.expires, removed: removals.removal(of: device.id)))
        }
        for record in removals.all where !rows.contains(where: { $0.id == record.device }) {
            rows.append(Row(id: record.device, name: record.deviceName, isThisDevice: false, lastSeen: nil, expires: nil, removed: record))
        }
        return rows
    }

    /// The one device `text` names: an exact name, or an ID prefix of at least 8 hex digits.
    static func resolve(_ text: String, among rows: [Row]) throws -> Row {
        let byName = rows.filter { $0.name == text }
        let lowered = text.lowercased()
        let byID = lowered.count >= 8 ? rows.filter { $0.id.hex.hasPrefix(lowered) } : []
        let matches = byName.isEmpty ? byID : byName
        if matches.count == 1 { return matches[0] }
        if matches.count > 1 {
            throw CommandError(.usage, "\(text) names \(matches.count) devices (\(matches.map(\.id.short).joined(separator: ", "))); give its ID")
        }
        // A full ID of a device never met here can still be removed.
        if let id = DeviceID(hex: lowered) {
            return Row(id: id, name: "", isThisDevice: false, lastSeen: nil, expires: nil, removed: nil)
        }
        throw CommandError(.notFound, "no device \(text) known here (see hearth device list; a device never met here can be removed by its full ID)")
    }

    static func json(_ record: DeviceRemoval) -> String {
        "{\"removed\":\"\(record.device.hex)\",\"name\":\(PropertyListJSON.quote(record.deviceName)),\"at\":\"\(Row.iso(record.date))\"}"
    }
}
