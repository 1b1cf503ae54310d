import Foundation
import Logging
import HearthIdentity
import HearthTestSupport
import HearthTesting
import HearthTransport
import Testing

/// Issue 14, certificates that age, as a household runs it: the laptop's daemon runs with
/// `--unlock`; the kitchen's certificate is 10 days from expiry. The kitchen's daemon gets a new
/// one without anyone touching the kitchen, saves it as its device.pem, and a third device accepts
/// it in a handshake.
@Suite struct CertificateRenewalCommandTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-renew-\(UUID().uuidString)").path
    let runtime = "/tmp/hearth-renew-run-\(UUID().uuidString.prefix(8))"

    @Test("hearth daemon --unlock on the laptop renews the kitchen daemon's certificate, which is saved and accepted",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"),
          .timeLimit(.minutes(2)))
    func daemonRenewsPeer() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let (laptop, kitchen) = try await Device.household(root: root)
        // The kitchen's certificate, reissued (with the passphrase, as an owner could) to expire in 10 days.
        let (kitchenAccounts, accountID, old, authority) = try Self.reissue(kitchen, expiringIn: 10)

        var daemons: [ChildProcess] = []
        defer { for daemon in daemons { daemon.terminate() } }
        for (device, extra) in [(laptop, ["--unlock"]), (kitchen, [])] {
            var environment = HearthCLI.environment
            try FileManager.default.createDirectory(atPath: "\(runtime)/\(device.name)", withIntermediateDirectories: true)
            environment["XDG_RUNTIME_DIR"] = "\(runtime)/\(device.name)"
            environment["HEARTH_PASSPHRASE"] = "pw"
            let daemon = try ChildProcess(try #require(HearthCLI.binary),
                                          ["daemon", "--log-level", "info", "--port", String(device.port), "--peer", "127.0.0.1:\(device.peerPort)"]
                                              + extra + device.directories,
                                          environment: environment)
            daemons.append(daemon)
        }
        #expect(await daemons[0].waitForOutput("certificates are renewed as they come due", inErrors: true, upTo: .seconds(30)),
                "\(daemons[0].errorOutput)")
        // Saved: the kitchen's device.pem now lasts about a year, for the same key.
        let yearFromNow = Date().addingTimeInterval(300 * 86_400)
        var saved: DeviceIdentity?
        let renewed = await eventually {
            saved = try? kitchenAccounts.loadIdentity(accountID)
            return saved.map { $0.certificate.notValidAfter > yearFromNow } ?? false
        }
        #expect(renewed, "kitchen: \(daemons[1].errorOutput)\nlaptop: \(daemons[0].errorOutput)")
        #expect(saved?.deviceID == old.deviceID)
        #expect(daemons[1].errorOutput.contains("certificate was renewed"), "\(daemons[1].errorOutput)")
        // A third device of the account accepts what the kitchen presents now.
        let phone = try authority.makeDevice(named: "phone")
        let connection = try await PeerTransport(identity: phone, logger: Logger(label: "test")).connect(host: "127.0.0.1", port: kitchen.port)
        #expect(connection.peer.certificate.notValidAfter > yearFromNow)
        #expect(connection.peer.deviceID == old.deviceID)
        await connection.close()
    }

    /// What `hearth device list --json` says of a device: its certificate's expiry and the start of its renewal window.
    static func listed(_ device: Device, named name: String, environment: [String: String]) async throws -> (expires: Date, renewalFrom: Date) {
        let listed = try await HearthCLI.run(["device", "list", "--json"] + device.directories, environment: environment)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.output.utf8)) as? [[String: Any]], "\(listed.output) \(listed.error)")
        let row = try #require(rows.first { $0["name"] as? String == name }, "\(listed.output)")
        let dates = ISO8601DateFormatter()
        return (try #require((row["expires"] as? String).flatMap(dates.date(from:)), "\(row)"),
                try #require((row["renewalFrom"] as? String).flatMap(dates.date(from:)), "\(row)"))
    }

    /// Replaces `device`'s certificate with one of the same key that expires `days` from now,
    /// issued with the account passphrase as an owner could.
    /// Returns its account store, the account, the identity it had and the unlocked authority.
    @discardableResult
    static func reissue(_ device: Device, expiringIn days: Double) throws
        -> (accounts: AccountStore, account: AccountID, old: DeviceIdentity, authority: AccountAuthority) {
        let accounts = AccountStore(directory: URL(fileURLWithPath: device.config), logger: Logger(label: "test"))
        let accountID = try #require(try accounts.currentAccountID())
        let authority = try accounts.loadAuthority(accountID, passphrase: "pw")
        let old = try accounts.loadIdentity(accountID)
        try accounts.replaceDeviceCertificate(
            try authority.issueDeviceCertificate(for: old.privateKey.publicKey, deviceName: device.name,
                                                 notAfter: Date().addingTimeInterval(days * 86_400)),
            of: accountID)
        return (accounts, accountID, old, authority)
    }

    @Test("The documented way: --renewal-window 400 brings the kitchen (300 days left) into its window; the laptop's daemon (--unlock) renews it, device list --json shows the new expiry on both, and the laptop accepts the new certificate",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"),
          .timeLimit(.minutes(2)))
    func renewalWindowOption() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let (laptop, kitchen) = try await Device.household(root: root)
        // The kitchen's certificate has 300 days left: outside the default window of 90 days.
        try Self.reissue(kitchen, expiringIn: 300)

        func environment(_ device: Device) throws -> [String: String] {
            var environment = HearthCLI.environment
            try FileManager.default.createDirectory(atPath: "\(runtime)/\(device.name)", withIntermediateDirectories: true)
            environment["XDG_RUNTIME_DIR"] = "\(runtime)/\(device.name)"
            environment["HEARTH_PASSPHRASE"] = "pw"
            return environment
        }
        let before = try await Self.listed(kitchen, named: "kitchen", environment: try environment(kitchen))
        #expect(abs(before.expires.timeIntervalSince(before.renewalFrom) - 90 * 86_400) < 1)
        #expect(before.renewalFrom > Date().addingTimeInterval(200 * 86_400), "not due: \(before)")

        func daemon(_ device: Device, _ extra: [String]) throws -> ChildProcess {
            try ChildProcess(try #require(HearthCLI.binary), ["daemon", "--log-level", "info", "--port", String(device.port),
                                                             "--peer", "127.0.0.1:\(device.peerPort)"] + extra + device.directories,
                             environment: try environment(device))
        }
        // Both with the window: the kitchen asks, the laptop (CA unlocked) grants what falls within it.
        let laptopDaemon = try daemon(laptop, ["--unlock", "--renewal-window", "400"])
        defer { laptopDaemon.terminate() }
        var kitchenDaemon = try daemon(kitchen, ["--renewal-window", "400"])
        defer { kitchenDaemon.terminate() }
        var after = before
        // Checked as the kitchen's account folder changes (it saves its renewed identity there).
        let renewed = try await untilFilesChange([kitchen.config], deadline: .seconds(60)) {
            after = try await Self.listed(kitchen, named: "kitchen", environment: try environment(kitchen))
            return after.expires > Date().addingTimeInterval(360 * 86_400)
        }
        #expect(renewed, "kitchen: \(kitchenDaemon.errorOutput)\nlaptop: \(laptopDaemon.errorOutput)")
        #expect(kitchenDaemon.errorOutput.contains("certificate was renewed"), "\(kitchenDaemon.errorOutput)")
        #expect(laptopDaemon.errorOutput.contains("renewed the peer's certificate"), "\(laptopDaemon.errorOutput)")

        // The kitchen starts again with the default window (not due any more) and presents the new
        // certificate: the laptop accepts it (a write is confirmed) and lists its new expiry.
        kitchenDaemon.send(SIGTERM)
        #expect(await kitchenDaemon.wait(upTo: .seconds(30)) == 0)
        kitchenDaemon = try daemon(kitchen, [])
        #expect(await kitchenDaemon.waitForOutput("Ctrl-C to stop", inErrors: true, upTo: .seconds(30)), "\(kitchenDaemon.errorOutput)")
        let set = try await HearthCLI.run(["set", "--store", "com.example.colors", "k", "1"] + kitchen.directories, environment: try environment(kitchen))
        #expect((set.output + set.error).contains("confirmed by 1 peer device"), "\(set.output) \(set.error)")
        // Checked as the laptop's account folder changes (it records the certificate it met).
        let atLaptop = try await untilFilesChange([laptop.config], deadline: .seconds(30)) {
            try await Self.listed(laptop, named: "kitchen", environment: try environment(laptop)).expires == after.expires
        }
        #expect(atLaptop, "laptop: \(laptopDaemon.errorOutput)")
    }
}
