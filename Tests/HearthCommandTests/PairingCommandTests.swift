import Foundation
import HearthTestSupport
import Testing

/// Issue 14's pairing across two virtual hosts (scripts/testnet/multihost.sh), each with its own
/// network namespace, /run, D-Bus and avahi-daemon: `hearth account join --pair` on kitchen,
/// `hearth device approve` on laptop, which finds it by mDNS alone. The per-host script,
/// scripts/testnet/pairing.sh, plays both people (each types the code the other device shows,
/// or a wrong one) and prints one check per line; this test reads them.
@Suite("Pairing on two virtual hosts")
struct PairingCommandTests {
    @Test("kitchen joins through hearth device approve on laptop with matching codes, then they sync; a mismatched code on either side or a wrong passphrase admits nothing",
          .enabled(if: getuid() == 0, "building host namespaces needs root"),
          .enabled(if: HearthCLI.binary != nil, "swift build first"),
          .timeLimit(.minutes(4)))
    func pairing() async throws {
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-mh-pairing-\(UUID())").path
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: shared) }
        let root = MultiHostDaemonTests.repositoryRoot
        let result = try await ChildProcess.run(
            "\(root)/scripts/testnet/multihost.sh",
            ["-n", "2", "-4", "--", "\(root)/scripts/testnet/pairing.sh", shared, try #require(HearthCLI.binary)],
            environment: HearthCLI.environment, timeout: .seconds(220))
        print(result.output)
        #expect(result.status == 0, "multihost.sh failed:\n\(result.output)\n\(result.error)")
        let lines = result.output.split(separator: "\n").map(String.init)
        func check(_ host: Int, _ name: String) -> String? {
            lines.first { $0.hasPrefix("[h\(host)] check \(name) ") }.map { String($0.dropFirst("[h\(host)] check \(name) ".count)) }
        }
        let context = "\(result.output)\n\(result.error)"
        // Every round showed the same code on both screens: nobody in the middle.
        for round in ["wrong-code", "newcomer-refuses", "wrong-passphrase", "ok"] {
            #expect(check(1, "\(round)-codes-match") == "yes", "\(round): \(context)")
            #expect(check(2, "\(round)-codes-match") == "yes", "\(round): \(context)")
        }
        // laptop's person types a code that is not kitchen's: both refuse (12), nothing admitted.
        #expect(check(1, "wrong-code-approve-status") == "12", "\(context)")
        #expect(check(2, "wrong-code-join-status") == "12", "\(context)")
        #expect(check(2, "wrong-code-joined") == "no", "\(context)")
        #expect(check(1, "wrong-code-laptop-lists-kitchen") == "0", "\(context)")
        // kitchen's person types a wrong code: the same.
        #expect(check(1, "newcomer-refuses-approve-status") == "12", "\(context)")
        #expect(check(2, "newcomer-refuses-join-status") == "12", "\(context)")
        #expect(check(2, "newcomer-refuses-joined") == "no", "\(context)")
        #expect(check(1, "newcomer-refuses-laptop-lists-kitchen") == "0", "\(context)")
        // Matching codes, a wrong passphrase: approve exits 3 (as every wrong passphrase), kitchen is refused.
        #expect(check(1, "wrong-passphrase-approve-status") == "3", "\(context)")
        #expect(check(2, "wrong-passphrase-join-status") == "12", "\(context)")
        #expect(check(2, "wrong-passphrase-joined") == "no", "\(context)")
        #expect(check(1, "wrong-passphrase-laptop-lists-kitchen") == "0", "\(context)")
        // Matching codes, the right passphrase: kitchen joins laptop's account.
        #expect(check(1, "ok-approve-status") == "0", "\(context)")
        #expect(check(2, "ok-join-status") == "0", "\(context)")
        #expect(check(2, "ok-joined") == "yes", "\(context)")
        #expect(check(1, "ok-laptop-lists-kitchen") == "1", "\(context)")
        #expect(check(2, "kitchen-account") == "same", "\(context)")
        #expect(check(2, "kitchen-ca-key") == "protected", "\(context)")
        #expect(check(2, "kitchen-lists-laptop") == "1", "\(context)")
        #expect(check(2, "kitchen-lists-itself") == "1", "\(context)")
        // And they sync, both ways, found by mDNS.
        #expect(check(2, "sync-laptop-to-kitchen") == "ok", "\(context)")
        #expect(check(1, "sync-kitchen-to-laptop") == "ok", "\(context)")
    }
}
