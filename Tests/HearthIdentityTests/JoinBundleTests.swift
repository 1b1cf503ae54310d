import Foundation
import Logging
import HearthIdentity
import Testing

@Suite("Join bundles")
struct JoinBundleTests {
    @Test("Export, import in a second config directory with the right passphrase, refuse a wrong one")
    func exportImport() throws {
        let first = makeTemporaryDirectory(), second = makeTemporaryDirectory(), third = makeTemporaryDirectory()
        defer { [first, second, third].forEach(removeTemporaryDirectory) }
        let laptop = AccountStore(directory: first, logger: Logger(label: "test"), scrypt: .testing)
        let original = try laptop.createAccount(displayName: "The Smiths", passphrase: "correct horse battery staple", deviceName: "laptop")
        let bundle = try laptop.exportJoinBundle(original.account.id)
        let text = String(decoding: bundle, as: UTF8.self)
        #expect(text.hasPrefix(JoinBundle.header))
        #expect(text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        #expect(!text.contains("-----BEGIN PRIVATE KEY-----"))

        // Wrong passphrase: a clear error, nothing stored, still signed out.
        let phone = AccountStore(directory: second, logger: Logger(label: "test"), scrypt: .testing)
        let wrong = #expect(throws: IdentityError.self) {
            try phone.importJoinBundle(bundle, passphrase: "correct horse battery stapler", deviceName: "phone")
        }
        #expect(wrong?.code == .wrongPassphrase)
        #expect(wrong?.description.contains("passphrase") == true)
        #expect(try phone.currentAccountID() == nil)
        #expect(try phone.accounts().isEmpty)

        // Right passphrase: same account, a device of its own, accepted by the account's trust.
        let joined = try phone.importJoinBundle(bundle, passphrase: "correct horse battery staple", deviceName: "phone")
        #expect(joined.account.id == original.account.id)
        #expect(joined.account.displayName == "The Smiths")
        #expect(joined.deviceID != original.deviceID)
        #expect(try original.account.trust.validateDevice(joined.certificate) == joined.deviceID)
        #expect(try joined.account.trust.validateDevice(original.certificate) == original.deviceID)
        #expect(try phone.currentAccountID() == original.account.id)
        // Importing again keeps the device identity.
        let again = try phone.importJoinBundle(bundle, passphrase: "correct horse battery staple", deviceName: "phone")
        #expect(again.deviceID == joined.deviceID)

        // The joined device can itself export a bundle for a third device, under the same account passphrase.
        let tablet = AccountStore(directory: third, logger: Logger(label: "test"), scrypt: .testing)
        let relayed = try phone.exportJoinBundle(joined.account.id)
        #expect(try tablet.importJoinBundle(relayed, passphrase: "correct horse battery staple", deviceName: "tablet").account.id == original.account.id)
    }

    @Test("Damaged bundles are refused as damaged")
    func damaged() throws {
        let authority = try AccountAuthority.create(displayName: "The Smiths")
        let bundle = try JoinBundle.export(authority, passphrase: "pw", scrypt: .testing)
        let text = String(decoding: bundle, as: UTF8.self)

        func code(_ data: Data) -> IdentityError.Code? {
            let error = #expect(throws: IdentityError.self) { try JoinBundle.open(data, passphrase: "pw") }
            return error?.code
        }
        #expect(code(Data("hello".utf8)) == .damagedBundle)
        #expect(code(bundle.prefix(bundle.count / 2)) == .damagedBundle)
        // Another account's certificate spliced in: the key no longer matches it.
        let other = try AccountAuthority.create(displayName: "Others")
        let keyPart = text[text.range(of: "-----BEGIN ENCRYPTED PRIVATE KEY-----")!.lowerBound...]
        let spliced = JoinBundle.header + "\n" + other.account.caCertificate.pemEncoded + keyPart
        #expect(code(Data(spliced.utf8)) == .damagedBundle)
        // The right bundle opens.
        #expect(try JoinBundle.open(bundle, passphrase: "pw").account.id == authority.account.id)
    }

    @Test("The encrypted key is standard PKCS#8: the openssl tool opens one written with OpenSSL's parameter cap, and Hearth opens the openssl tool's")
    func interoperable() throws {
        // OpenSSL's PKCS#8 reader caps scrypt at 32 MiB (below Hearth's standard 256 MiB),
        // so the format is checked with N = 2^14, the parameters older Hearth wrote.
        let key = try Ed25519PrivateKey()
        let pem = try key.encryptedPEMRepresentation(passphrase: "s3cret", scrypt: ScryptParameters(n: 1 << 14, r: 8, p: 1))
        let dir = makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let file = dir.appendingPathComponent("k.pem")
        try Data(pem.utf8).write(to: file)
        let opened = try openssl(["pkey", "-in", file.path, "-passin", "pass:s3cret", "-pubout"])
        #expect(opened.status == 0)
        #expect(opened.output.contains("BEGIN PUBLIC KEY"))
        #expect(try Ed25519PrivateKey(encryptedPEMRepresentation: pem, passphrase: "s3cret").publicKey == key.publicKey)

        // A key sealed by the openssl tool the way Hearth 1 sealed bundles (OpenSSL's
        // PKCS5_pbe2_set_scrypt, N = 2^14, 8-byte salt) still opens.
        let plain = dir.appendingPathComponent("plain.pem"), sealed = dir.appendingPathComponent("sealed.pem")
        try Data(try key.pemRepresentation().utf8).write(to: plain)
        let written = try openssl(["pkcs8", "-topk8", "-in", plain.path, "-scrypt", "-scrypt_N", "16384", "-scrypt_r", "8", "-scrypt_p", "1",
                                   "-passout", "pass:older", "-out", sealed.path])
        try #require(written.status == 0)
        let olderPEM = try String(contentsOf: sealed, encoding: .utf8)
        #expect(try Ed25519PrivateKey(encryptedPEMRepresentation: olderPEM, passphrase: "older").publicKey == key.publicKey)
    }

    private func openssl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
