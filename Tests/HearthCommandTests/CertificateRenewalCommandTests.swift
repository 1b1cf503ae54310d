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
        let kitchenAccounts = AccountStore(directory: URL(fileURLWithPath: kitchen.config), logger: Logger(label: "test"))
        let accountID = try #require(try kitchenAccounts.currentAccountID())
        let authority = try kitchenAccounts.loadAuthority(accountID, passphrase: "pw")
        let old = try kitchenAccounts.loadIdentity(accountID)
        let short = try authority.issueDeviceCertificate(for: old.privateKey.publicKey, deviceName: "kitchen",
                                                         notAfter: Date().addingTimeInterval(10 * 86_400))
        try kitchenAccounts.replaceDeviceCertificate(short, of: accountID)

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
}
