import Foundation
import HearthTestSupport
import Testing

/// Issue 14's removal across four virtual hosts (scripts/testnet/multihost.sh), each with its
/// own network namespace, /run, D-Bus and avahi-daemon: `hearth device remove phone` on A, and
/// what B, the phone and C (away during the removal) then do. The per-host script,
/// scripts/testnet/device-removal.sh, says what each host does; this test reads its checks.
@Suite("Device removal on four virtual hosts")
struct DeviceRemovalCommandTests {
    @Test("hearth device remove phone on A: B drops the phone within 2 s and refuses it after a restart; its later write reaches no one; C, away meanwhile, hears of it from B",
          .enabled(if: getuid() == 0, "building host namespaces needs root"),
          .enabled(if: HearthCLI.binary != nil, "swift build first"),
          .timeLimit(.minutes(4)))
    func removal() async throws {
        let result = try await MultiHostRun.run(hosts: 4, script: "device-removal.sh", arguments: [try #require(HearthCLI.binary)])
        let check = result.check
        // A knew the phone before, lists it as removed after; without the account passphrase, or
        // with a wrong one, nothing is removed (the CA key stays sealed).
        #expect(check(1, "a-list-before-phone") == "1", "\(result.output)")
        #expect(check(1, "remove-without-passphrase") == "refused", "\(result.output)")
        #expect(check(1, "remove-wrong-passphrase") == "refused", "\(result.output)")
        #expect(check(1, "a-list-after") == "1", "\(result.output)")
        // B: the phone's connection gone and the record held within 2 s of the command's return.
        let closed = check(2, "b-closed-phone-after").flatMap(Double.init)
        #expect(closed.map { $0 < 2 } == true, "\(result.output)")
        // The phone's write after the removal reaches no device; its earlier write stays.
        #expect(check(1, "a-late") == "absent", "\(result.output)")
        #expect(check(2, "b-late") == "absent", "\(result.output)")
        #expect(check(4, "c-late") == "absent", "\(result.output)")
        #expect(check(2, "b-early") == "kept", "\(result.output)")
        // The removal survives B's restart: the restarted phone dials B and is refused.
        #expect(check(2, "b-refused-after-restart").flatMap(Int.init).map { $0 >= 1 } == true, "\(result.output)")
        #expect(check(2, "b-list-after-restart") == "1", "\(result.output)")
        // The phone knows and says so; openssl s_client with its certificate gets the signed record and a close.
        #expect(check(3, "phone-status") == "1", "\(result.output)")
        #expect(check(3, "phone-log").flatMap(Int.init).map { $0 >= 1 } == true, "\(result.output)")
        #expect(check(3, "phone-s_client").flatMap(Int.init).map { $0 >= 1 } == true, "\(result.output)")
        // C was away, came back when only B (not A) could tell it, and learned it from B.
        #expect(check(4, "c-learned-after").flatMap(Double.init) != nil, "\(result.output)")
    }
}
