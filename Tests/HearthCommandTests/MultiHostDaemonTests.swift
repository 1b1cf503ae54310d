import Foundation
import HearthTestSupport
import Testing

/// Issue 13's points 1, 2 and 4 across four virtual hosts (scripts/testnet/multihost.sh), each
/// with its own network namespace, /run, D-Bus and avahi-daemon, joined by a virtual bridge:
/// the daemons find each other by mDNS alone. The per-host script,
/// scripts/testnet/daemon-household.sh, says what each host does; this test reads its checks.
@Suite("The daemon on four virtual hosts")
struct MultiHostDaemonTests {
    @Test("Points 1, 2 and 4: a value left on A is read at open on B; a NAS hub hands a store to a phone that reaches only it; 3 apps and 5 stores are one service and one connection per peer",
          .enabled(if: getuid() == 0, "building host namespaces needs root"),
          .enabled(if: HearthCLI.binary != nil && ChildProcess.builtProduct("hearth-test-writer") != nil, "swift build --build-tests first"),
          .timeLimit(.minutes(4)))
    func household() async throws {
        let run = try await MultiHostRun.run(hosts: 4, script: "daemon-household.sh", arguments: [
            try #require(HearthCLI.binary), try #require(ChildProcess.builtProduct("hearth-test-writer"))])
        let check = run.check
        let result = run
        // Point 1: B's new app process attached to B's daemon and had k = 1 at open, though no
        // app on B ever opened the store and A's writer had exited 10 s before.
        #expect(check(2, "background-read") == "read attached 1", "\(result.output)")

        // Point 4: 3 apps with 5 stores on B, all attached to the daemon; one TCP listener; A
        // browses exactly one _hearth._tcp service for B; B has one connection to A and one to C.
        #expect(check(2, "holders") == "6 attached, 0 hosting", "\(result.output)")
        #expect(check(2, "listening-tcp") == "1", "\(result.output)")
        #expect(check(1, "services-of-h2")?.hasPrefix("1 [") == true, "\(result.output)")
        #expect(check(2, "connections-of-h2") == "[169.254.77.1 169.254.77.3 ]", "\(result.output)")

        // Point 2: C, which never opened the store, got it from A and kept it; D, started after A
        // and B left, reached only C and got the value.
        #expect(check(3, "hub-has-notes")?.hasPrefix("at ") == true, "\(result.output)")
        #expect(check(3, "hub-log").flatMap { Int($0) }.map { $0 >= 1 } == true, "\(result.output)")
        #expect(check(4, "phone-got-notes")?.hasPrefix("after ") == true, "\(result.output)")
        #expect(check(4, "connections-of-h4") == "[169.254.77.3 ]", "\(result.output)")
    }
}
