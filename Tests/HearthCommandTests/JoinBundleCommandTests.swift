import Foundation
import HearthIdentity
import HearthTestSupport
import Testing

/// Issue 12 points 7 and 8 through the real `hearth` binary: a crafted bundle is refused
/// at once, `account export` generates a strong passphrase, and warns about a weak one.
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

    @Test("account export without a passphrase prints six generated words once, different each time; the bundle opens with them",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func generatedPassphrase() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let created = try await HearthCLI.run(["account", "create", "--device", "laptop"] + directories("laptop"))
        try #require(created.status == 0, "\(created.error)")
        let list = Set(Passphrase.wordList.map(String.init))

        // To a file: the passphrase on stdout.
        let first = try await HearthCLI.run(["account", "export", "--output", "\(root)/one.bundle"] + directories("laptop"))
        try #require(first.status == 0, "\(first.error)")
        let phrase = try #require(Self.passphrase(in: first.output), "\(first.output)")
        #expect(phrase.split(separator: " ").count == 6)
        #expect(phrase.split(separator: " ").allSatisfy { list.contains(String($0)) }, "\(phrase)")
        #expect(first.output.components(separatedBy: phrase).count == 2, "printed exactly once")
        #expect(!first.error.contains("weak"))

        // To stdout: the bundle stays clean, the passphrase goes to stderr.
        let second = try await HearthCLI.run(["account", "export"] + directories("laptop"))
        try #require(second.status == 0, "\(second.error)")
        #expect(second.output.hasPrefix(JoinBundle.header))
        let other = try #require(Self.passphrase(in: second.error), "\(second.error)")
        #expect(!second.output.contains(other))
        #expect(other != phrase)

        let joined = try await HearthCLI.run(["account", "join", "\(root)/one.bundle", "--passphrase", phrase, "--device", "kitchen"]
                                             + directories("kitchen"))
        #expect(joined.status == 0, "\(joined.error)")
        #expect(joined.output.contains("joined account"))
    }

    @Test("account export warns on stderr about a weak passphrase such as correct horse, and still writes the bundle",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func weakPassphraseWarned() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let created = try await HearthCLI.run(["account", "create", "--device", "laptop"] + directories("laptop"))
        try #require(created.status == 0, "\(created.error)")
        let weak = try await HearthCLI.run(["account", "export", "--passphrase", "correct horse", "--output", "\(root)/weak.bundle"] + directories("laptop"))
        #expect(weak.status == 0, "\(weak.error)")
        #expect(weak.error.contains("warning: weak passphrase"), "\(weak.error)")
        #expect(FileManager.default.fileExists(atPath: "\(root)/weak.bundle"))
        let strong = Passphrase.generate()
        let fine = try await HearthCLI.run(["account", "export", "--passphrase", strong, "--output", "\(root)/strong.bundle"] + directories("laptop"))
        #expect(fine.status == 0, "\(fine.error)")
        #expect(!fine.error.contains("weak"), "\(fine.error)")
    }

    /// The indented line after "passphrase (shown only now…":
    static func passphrase(in text: String) -> String? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let header = lines.firstIndex(where: { $0.hasPrefix("passphrase (shown only now") }) else { return nil }
        return lines[(header + 1)...].first { $0.hasPrefix("    ") }.map { $0.trimmingCharacters(in: .whitespaces) }
    }
}
