import Foundation
import HearthIdentity
import HearthTestSupport
import HearthTesting
import HearthTransport
import Logging
import Testing

/// Issue 26, point 7, as a user sees it: a member that verifies this device's certificate and
/// answers with a TLS `certificate_revoked` alert made `hearth status` say "removed" for good.
/// Only the account-signed removal record may do that.
@Suite(.serialized, .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
struct RevokedAlertTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-alert-\(UUID().uuidString)").path
    let runtime = "/tmp/hrt-\(UUID().uuidString.prefix(8))"

    @Test("A member's bare certificate_revoked alert: the daemon's device is not marked removed, before or after a restart, and still syncs")
    func bareAlert() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let (laptop, kitchen) = try await Device.household(root: root)
        var environment = HearthCLI.environment
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        environment["XDG_RUNTIME_DIR"] = runtime
        // The rogue: a member of the household whose TLS server refuses the laptop as revoked
        // (by removals of an account of its own making, which name the laptop).
        let bundle = try Data(contentsOf: URL(fileURLWithPath: "\(root)/home.bundle"))
        let rogue = try AccountStore(directory: URL(fileURLWithPath: "\(root)/rogue"), logger: Logger(label: "test"), scrypt: .testing)
            .importJoinBundle(bundle, passphrase: "pw", deviceName: "rogue")
        let laptopID = try #require(DeviceID(hex: try await laptop.deviceID()))
        let other = try AccountAuthority.create(displayName: "Elsewhere")
        let fake = DeviceRemovals(trust: other.account.trust, logger: Logger(label: "test"))
        fake.merge([try other.removal(of: laptopID, named: "laptop")])
        let logs = LogCapture()
        let listener = try await PeerTransport(identity: rogue, removals: fake, logger: logs.logger("rogue")).listen(host: "127.0.0.1", port: 0)
        let roguePort = try #require(listener.port)
        let kitchenServe = try await HearthCLI.serve(kitchen)
        defer { kitchenServe.terminate() }

        func startLaptop() async throws -> ChildProcess {
            let daemon = try ChildProcess(try #require(HearthCLI.binary), ["daemon", "--port", String(laptop.port), "--peer", "127.0.0.1:\(roguePort)",
                                                                         "--peer", "127.0.0.1:\(kitchen.port)"] + laptop.directories,
                                          environment: environment)
            try #require(await daemon.waitForOutput("Ctrl-C to stop", inErrors: true, upTo: .seconds(30)), "\(daemon.errorOutput)")
            return daemon
        }
        func refusals() -> Int { logs.all.filter { $0.text.contains("removed from the account") }.count }
        var daemon = try await startLaptop()
        defer { daemon.terminate() }
        // Refused twice: the daemon dialled again (a refusal, not a removal).
        #expect(await logs.until { refusals() >= 2 }, "\(daemon.errorOutput)")
        let status = try await HearthCLI.run(["status"] + laptop.directories, environment: environment)
        #expect(!status.output.contains("removed"), "\(status.output)")
        #expect(daemon.errorOutput.contains("without the signed removal record"), "\(daemon.errorOutput)")
        // It still syncs with the kitchen.
        let set = try await HearthCLI.run(["set"] + laptop.store + ["k", "1"] + laptop.directories, environment: environment)
        #expect((set.output + set.error).contains("confirmed by 1 peer device"), "\(set.output) \(set.error)")

        daemon.send(SIGTERM)
        #expect(await daemon.wait(upTo: .seconds(30)) == 0)
        let before = refusals()
        daemon = try await startLaptop()
        #expect(await logs.until { refusals() > before }, "\(daemon.errorOutput)")
        let after = try await HearthCLI.run(["status"] + laptop.directories, environment: environment)
        #expect(!after.output.contains("removed"), "\(after.output)")
        await listener.close()
    }
}
