import Foundation
import HearthIdentity
import HearthTestSupport
import Testing

/// Issue 12 points 7 and 8 through the real `hearth` binary: a crafted bundle is refused
/// at once, `account create` generates a strong account passphrase (the one bundles are sealed
/// under since issue 14), and warns about a weak one.
@Suite(.serialized) struct JoinBundleCommandTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-bundle-\(UUID().uuidString)").path
    static let regressions = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz/regressions/join-bundle")

    func directories(_ name: String) -> [String] { ["--config-dir", "\(root)/\(name)/config", "--data-dir", "\(root)/\(name)/data"] }

    @Test("account join refuses bundles asking for scrypt p = 8000 or N = 2^40 in well under a second",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func costlyBundleRefusedFast() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        for name in ["refused-scrypt-p8000.bundle", "refused-scrypt-n2e40.bundle"] {
            let file = Self.regressions.appendingPathComponent(name).path
            // Timed by bash around the process itself, so that a busy test runner resuming
            // this task late does not count.
            let binary = try #require(HearthCLI.binary)
            let joined = try await ChildProcess.run("/bin/bash", ["-c", "TIMEFORMAT=%R; time \"$@\"", "timed", binary,
                                                                  "account", "join", file, "--passphrase", "fuzz", "--device", "victim"] + directories("victim"),
                                                    environment: HearthCLI.environment)
            let lines = joined.error.split(separator: "\n")
            let elapsed = try #require(lines.last.flatMap { Double($0) }, "\(joined.error)")
            #expect(joined.status == 3, "\(name): \(joined.error)")
            #expect(joined.error.contains("join bundle refused") && joined.error.contains("at most N = 2^18, r = 8, p = 1"), "\(joined.error)")
            // Before the fix, p = 8000 kept the command busy past 60 s.
            #expect(elapsed < 1, "\(name): refused after \(elapsed) s")
            print("hearth account join \(name): refused after \(elapsed) s")
        }
        let show = try await HearthCLI.run(["account", "show"] + directories("victim"))
        #expect(show.output.contains("signed out"))
    }

    @Test("account create without a passphrase prints six generated words once, different each time; export needs none; the bundle opens with them",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func generatedPassphrase() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let list = Set(Passphrase.wordList.map(String.init))
        let created = try await HearthCLI.run(["account", "create", "--device", "laptop"] + directories("laptop"))
        try #require(created.status == 0, "\(created.error)")
        let phrase = try #require(Self.passphrase(in: created.output), "\(created.output)")
        #expect(phrase.split(separator: " ").count == 6)
        #expect(phrase.split(separator: " ").allSatisfy { list.contains(String($0)) }, "\(phrase)")
        #expect(created.output.components(separatedBy: phrase).count == 2, "printed exactly once")
        #expect(!created.error.contains("weak"))

        // Another account: other words. With --json, they go to stderr and stdout stays JSON.
        let other = try await HearthCLI.run(["account", "create", "--device", "desk", "--json"] + directories("desk"))
        try #require(other.status == 0, "\(other.error)")
        #expect(other.output.hasPrefix("{") && !other.output.contains("shown only now"), "\(other.output)")
        let otherPhrase = try #require(Self.passphrase(in: other.error), "\(other.error)")
        #expect(otherPhrase != phrase)

        // Export asks for nothing and prints no passphrase; to stdout, the bundle alone.
        let toFile = try await HearthCLI.run(["account", "export", "--output", "\(root)/one.bundle"] + directories("laptop"))
        try #require(toFile.status == 0, "\(toFile.error)")
        #expect(Self.passphrase(in: toFile.output + toFile.error) == nil)
        let toStdout = try await HearthCLI.run(["account", "export"] + directories("laptop"))
        try #require(toStdout.status == 0, "\(toStdout.error)")
        #expect(toStdout.output.hasPrefix(JoinBundle.header))
        #expect(toStdout.error.isEmpty, "\(toStdout.error)")

        let wrong = try await HearthCLI.run(["account", "join", "\(root)/one.bundle", "--passphrase", otherPhrase, "--device", "kitchen"]
                                            + directories("kitchen"))
        #expect(wrong.status == 3, "\(wrong.error)")
        let joined = try await HearthCLI.run(["account", "join", "\(root)/one.bundle", "--passphrase", phrase, "--device", "kitchen"]
                                             + directories("kitchen"))
        #expect(joined.status == 0, "\(joined.error)")
        #expect(joined.output.contains("joined account"))
    }

    @Test("account create warns on stderr about a weak passphrase such as correct horse, and still creates the account",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func weakPassphraseWarned() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let weak = try await HearthCLI.run(["account", "create", "--device", "laptop", "--passphrase", "correct horse"] + directories("laptop"))
        #expect(weak.status == 0, "\(weak.error)")
        #expect(weak.error.contains("warning: weak passphrase"), "\(weak.error)")
        #expect(Self.passphrase(in: weak.output) == nil, "a given passphrase is not printed")
        let show = try await HearthCLI.run(["account", "show"] + directories("laptop"))
        #expect(show.output.contains("signed in to Home"))
        let strong = Passphrase.generate()
        let fine = try await HearthCLI.run(["account", "create", "--device", "desk", "--passphrase", strong] + directories("desk"))
        #expect(fine.status == 0, "\(fine.error)")
        #expect(!fine.error.contains("weak"), "\(fine.error)")
    }

    /// The indented line after "account passphrase (shown only now…":
    static func passphrase(in text: String) -> String? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let header = lines.firstIndex(where: { $0.hasPrefix("account passphrase (shown only now") }) else { return nil }
        return lines[(header + 1)...].first { $0.hasPrefix("    ") }.map { $0.trimmingCharacters(in: .whitespaces) }
    }
}
