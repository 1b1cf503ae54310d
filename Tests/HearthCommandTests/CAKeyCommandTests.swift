import Foundation
import Logging
import HearthIdentity
import HearthTestSupport
import HearthTesting
import Testing

/// Issue 14 through the real `hearth` binary: a member's config folder, copied without the
/// passphrase, admits nobody, whatever `openssl` makes of it; the binary seals at N = 2^18; an
/// account of the old kind is flagged by every account command and `status`/`serve`, and
/// `account protect` migrates it.
@Suite(.serialized) struct CAKeyCommandTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-cakey-\(UUID().uuidString)").path
    static let passphrase = "sixteen or more characters of passphrase"
    static let warning = "warning: the CA key of account"

    func directories(_ name: String) -> [String] { ["--config-dir", "\(root)/\(name)/config", "--data-dir", "\(root)/\(name)/data"] }

    /// The account folder (`accounts/<id>`) of the one account in `config`.
    func accountFolder(_ config: String) throws -> (path: String, id: String) {
        let id = try #require(try FileManager.default.contentsOfDirectory(atPath: "\(config)/accounts").first)
        return ("\(config)/accounts/\(id)", id)
    }

    /// Whether openssl's error says it could not decrypt a key. A wrong passphrase fails
    /// AES-CBC's padding check ("bad decrypt") nearly always; about 1 time in 256 the padding
    /// checks out by chance and the garbage then fails to decode ("No supported data to
    /// decode"), which CI met once.
    static func refusedToDecrypt(_ error: String) -> Bool {
        error.contains("bad decrypt") || error.contains("No supported data to decode")
    }

    static func openssl(_ arguments: [String], in directory: String) async throws -> (status: Int32?, output: String, error: String) {
        try await ChildProcess.run("/bin/sh", ["-c", "cd \"$0\" && exec openssl \"$@\"", directory] + arguments)
    }

    @Test("A copy of a member's whole config folder without the passphrase: openssl cannot open ca.key nor make a certificate that openssl verify or AccountTrust accepts",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"),
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "no openssl tool"))
    func stolenFolderWithOpenSSL() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        // HearthCLI's environment seals at N = 2^10, which the openssl tool reads (it refuses
        // N = 2^18 whatever the passphrase): so a refusal below is the passphrase's doing, as
        // the same command with the right one shows.
        let created = try await HearthCLI.run(["account", "create", "--name", "The Smiths", "--device", "laptop",
                                               "--passphrase", Self.passphrase] + directories("laptop"))
        try #require(created.status == 0, "\(created.error)")
        let stolen = "\(root)/stolen"
        try FileManager.default.copyItem(atPath: "\(root)/laptop/config", toPath: stolen)
        let (folder, id) = try accountFolder(stolen)
        let trust = try AccountTrust(caCertificate: Certificate(pemEncoded: String(contentsOfFile: "\(folder)/ca.pem", encoding: .utf8)))
        let work = "\(root)/work"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        func run(_ arguments: [String]) async throws -> (status: Int32?, output: String, error: String) {
            try await Self.openssl(arguments, in: folder)
        }

        // ca.key does not open without the passphrase, or with a wrong one.
        for pass in ["pass:", "pass:wrong", "pass:\(Self.passphrase) "] {
            let opened = try await run(["pkey", "-in", "ca.key", "-passin", pass, "-noout"])
            #expect(opened.status != 0, "\(pass) opened ca.key")
            #expect(Self.refusedToDecrypt(opened.error), "\(opened.error)")
        }

        // A newcomer's key and request, and what openssl makes of them with the folder's files.
        #expect(try await run(["genpkey", "-algorithm", "ed25519", "-out", "\(work)/new.key"]).status == 0)
        #expect(try await run(["req", "-new", "-key", "\(work)/new.key", "-subj", "/O=\(id)/CN=intruder", "-out", "\(work)/new.csr"]).status == 0)
        let extensions = "\(work)/device.cnf"
        try Data("""
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=serverAuth,clientAuth
            subjectKeyIdentifier=hash
            authorityKeyIdentifier=keyid

            """.utf8).write(to: URL(fileURLWithPath: extensions))
        // A self-made CA of the account's name, keyed with the device key.
        #expect(try await run(["req", "-x509", "-new", "-key", "device.key", "-subj", "/CN=The Smiths",
                               "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                               "-out", "\(work)/fake-ca.pem"]).status == 0)
        let attempts: [(name: String, arguments: [String])] = [
            ("x509 -req -CA ca.pem -CAkey ca.key, no passphrase",
             ["x509", "-req", "-in", "\(work)/new.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-passin", "pass:", "-extfile", extensions]),
            ("x509 -req -CA ca.pem -CAkey ca.key, a wrong passphrase",
             ["x509", "-req", "-in", "\(work)/new.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-passin", "pass:wrong", "-extfile", extensions]),
            ("x509 -req -CA ca.pem -CAkey device.key",
             ["x509", "-req", "-in", "\(work)/new.csr", "-CA", "ca.pem", "-CAkey", "device.key", "-extfile", extensions]),
            ("req -x509 -CA ca.pem -CAkey device.key",
             ["req", "-x509", "-new", "-key", "\(work)/new.key", "-subj", "/O=\(id)/CN=intruder", "-CA", "ca.pem", "-CAkey", "device.key"]),
            ("x509 -req -CA device.pem -CAkey device.key",
             ["x509", "-req", "-in", "\(work)/new.csr", "-CA", "device.pem", "-CAkey", "device.key", "-extfile", extensions]),
            ("x509 -req -CA fake-ca.pem (the account's name, the device key) -CAkey device.key",
             ["x509", "-req", "-in", "\(work)/new.csr", "-CA", "\(work)/fake-ca.pem", "-CAkey", "device.key", "-extfile", extensions]),
        ]
        var made = 0
        for (index, attempt) in attempts.enumerated() {
            let output = "\(work)/forged-\(index).pem"
            let issued = try await run(attempt.arguments + ["-out", output])
            guard issued.status == 0 else {
                // openssl itself refuses: it cannot decrypt ca.key, or the key is not the CA's.
                #expect(Self.refusedToDecrypt(issued.error) || issued.error.contains("do not match"), "\(attempt.name): \(issued.error)")
                continue
            }
            made += 1
            let verified = try await run(["verify", "-CAfile", "ca.pem", "-untrusted", "device.pem", "-purpose", "sslclient", output])
            #expect(verified.status != 0, "openssl verify accepted the certificate of \(attempt.name)")
            let forged = try Certificate(pemEncoded: String(contentsOfFile: output, encoding: .utf8))
            #expect((#expect(throws: IdentityError.self, "\(attempt.name)") { try trust.validateDevice(forged) })?.code == .certificateRejected)
        }
        #expect(made == 2, "the certificates openssl could make at all: from device.pem and from the fake CA")

        // With the passphrase, the same tools do make a certificate that both accept: the
        // checks above can fail.
        #expect(try await run(["pkey", "-in", "ca.key", "-passin", "pass:\(Self.passphrase)", "-out", "\(work)/ca-clear.key"]).status == 0)
        let control = try await run(["x509", "-req", "-in", "\(work)/new.csr", "-CA", "ca.pem", "-CAkey", "\(work)/ca-clear.key",
                                     "-extfile", extensions, "-out", "\(work)/admitted.pem"])
        try #require(control.status == 0, "\(control.error)")
        #expect(try await run(["verify", "-CAfile", "ca.pem", "-purpose", "sslclient", "-x509_strict", "\(work)/admitted.pem"]).status == 0)
        let admitted = try Certificate(pemEncoded: String(contentsOfFile: "\(work)/admitted.pem", encoding: .utf8))
        #expect(try trust.validateDevice(admitted) == DeviceID(publicKey: try #require(admitted.publicKey)))
    }

    @Test("hearth seals the CA key with scrypt N = 2^18 by default, and with N = 2^10 only under HEARTH_TEST_WEAK_SCRYPT=1, which account show flags",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func standardCostByDefault() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        var environment = HearthCLI.environment
        environment["HEARTH_TEST_WEAK_SCRYPT"] = nil
        // One derivation at 2^18, the one this suite pays (a second and 256 MiB).
        let created = try await HearthCLI.run(["account", "create", "--device", "pc", "--passphrase", Self.passphrase] + directories("real"),
                                              environment: environment)
        try #require(created.status == 0, "\(created.error)")
        let shown = try await HearthCLI.run(["account", "show"] + directories("real"), environment: environment)
        #expect(shown.output.contains("CA key       encrypted under the account passphrase (scrypt N = 2^18, r = 8, p = 1)\n"), "\(shown.output)")
        #expect(!shown.output.contains("test setting"))
        let json = try await HearthCLI.run(["account", "show", "--json"] + directories("real"), environment: environment)
        #expect(json.output.contains("\"caKey\":\"protected\""), "\(json.output)")

        let weak = try await HearthCLI.run(["account", "create", "--device", "pc", "--passphrase", Self.passphrase] + directories("test"))
        try #require(weak.status == 0, "\(weak.error)")
        let flagged = try await HearthCLI.run(["account", "show"] + directories("test"))
        #expect(flagged.output.contains("(scrypt N = 2^10, r = 8, p = 1): below Hearth's standard N = 2^18, r = 8, p = 1, a test setting"),
                "\(flagged.output)")
    }

    @Test("An account of the old kind (clear ca.key) is flagged on stderr by account commands, status and serve; account protect seals it, with a generated passphrase when none is given",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func migrationThroughTheCommand() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let laptop = Device(name: "laptop", root: root, port: try LoopbackCluster.freePort(), peerPort: try LoopbackCluster.freePort())
        let created = try await HearthCLI.run(["account", "create", "--device", "laptop", "--passphrase", Self.passphrase] + laptop.directories)
        try #require(created.status == 0, "\(created.error)")
        // The account as Hearth wrote it before: the CA key in the clear.
        let (folder, _) = try accountFolder(laptop.config)
        let accounts = AccountStore(directory: URL(fileURLWithPath: laptop.config), logger: Logger(label: "test"))
        let id = try #require(try accounts.currentAccountID())
        let key = try accounts.loadAuthority(id, passphrase: Self.passphrase).privateKey
        try Data(try key.pemRepresentation().utf8).write(to: URL(fileURLWithPath: "\(folder)/ca.key"))
        let device = try await laptop.deviceID()

        // One line on stderr, from every account command and status; export refuses.
        for arguments in [["account", "show"], ["account", "show", "--json"], ["account", "switch", id.hex], ["status"]] {
            let ran = try await HearthCLI.run(arguments + laptop.directories)
            #expect(ran.status == 0, "\(arguments): \(ran.error)")
            let lines = ran.error.split(separator: "\n").filter { $0.hasPrefix(Self.warning) }
            #expect(lines.count == 1 && lines[0].hasSuffix("run hearth account protect"), "\(arguments): \(ran.error)")
        }
        let export = try await HearthCLI.run(["account", "export", "--output", "\(root)/home.bundle"] + laptop.directories)
        #expect(export.status == 1 && export.error.contains("stored unencrypted") && export.error.contains("hearth account protect"), "\(export.error)")
        #expect(!FileManager.default.fileExists(atPath: "\(root)/home.bundle"))
        // serve says it once at start.
        let serve = try await HearthCLI.serve(laptop)
        #expect(serve.errorOutput.components(separatedBy: Self.warning).count == 2, "\(serve.errorOutput)")
        serve.terminate()

        // protect without a passphrase: six generated words, printed once, which then open the key.
        let protected = try await HearthCLI.run(["account", "protect"] + laptop.directories)
        try #require(protected.status == 0, "\(protected.error)")
        #expect(protected.output.contains("encrypted the CA key of Home"), "\(protected.output)")
        let words = try #require(JoinBundleCommandTests.passphrase(in: protected.output), "\(protected.output)")
        #expect(words.split(separator: " ").count == 6)
        #expect(!protected.error.contains(Self.warning), "\(protected.error)")
        #expect(try String(contentsOfFile: "\(folder)/ca.key", encoding: .utf8).hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        #expect(try await laptop.deviceID() == device)
        for arguments in [["account", "show"], ["status"]] {
            let ran = try await HearthCLI.run(arguments + laptop.directories)
            #expect(!ran.error.contains(Self.warning), "\(arguments): \(ran.error)")
        }
        // Again: nothing to do; a wrong passphrase is refused, the right one confirmed.
        let again = try await HearthCLI.run(["account", "protect"] + laptop.directories)
        #expect(again.status == 0 && again.output.contains("already encrypted"), "\(again.output)")
        let wrong = try await HearthCLI.run(["account", "protect", "--passphrase", Self.passphrase] + laptop.directories)
        #expect(wrong.status == 3 && wrong.error.contains("wrong passphrase"), "\(wrong.error)")
        let right = try await HearthCLI.run(["account", "protect", "--passphrase", words] + laptop.directories)
        #expect(right.status == 0 && right.output.contains("the passphrase given opens it"), "\(right.output)")

        // A device joins with those words and can export (and so admit) in turn.
        let exported = try await HearthCLI.run(["account", "export", "--output", "\(root)/home.bundle"] + laptop.directories)
        try #require(exported.status == 0, "\(exported.error)")
        let joined = try await HearthCLI.run(["account", "join", "\(root)/home.bundle", "--passphrase", words, "--device", "kitchen"]
                                             + directories("kitchen"))
        #expect(joined.status == 0, "\(joined.error)")
        let relayed = try await HearthCLI.run(["account", "export", "--passphrase", words, "--output", "\(root)/relayed.bundle"] + directories("kitchen"))
        #expect(relayed.status == 0, "\(relayed.error)")
    }
}
