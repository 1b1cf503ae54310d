import Foundation
import Logging
import HearthIdentity
import Testing

/// Issue 14: the CA key is never stored in the clear on a device. It is sealed under the
/// account passphrase; only the device key is usable without it, so a copy of a device's
/// files cannot admit a device.
///
/// Accounts here seal with ``ScryptParameters/testing`` (N = 2^10), except the one test of
/// the default cost: the format and the checks are the same at every cost.
@Suite("CA key protection")
struct CAKeyProtectionTests {
    static let passphrase = "tidy kettle orbit lunar sketch pine"

    /// A new account in a fresh folder, as `createAccount` leaves it.
    static func member(_ root: URL, name: String = "laptop") throws -> (store: AccountStore, identity: DeviceIdentity) {
        let store = AccountStore(directory: root.appendingPathComponent("config"), logger: Logger(label: "test"), scrypt: .testing)
        return (store, try store.createAccount(displayName: "The Smiths", passphrase: passphrase, deviceName: name))
    }

    /// The 32-byte seed of an Ed25519 key: the last 32 bytes of its PKCS#8 DER.
    static func seed(of key: Ed25519PrivateKey) throws -> [UInt8] {
        let pem = try key.pemRepresentation()
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let der = try #require(Data(base64Encoded: body))
        try #require(der.count == 48)
        return Array(der.suffix(32))
    }

    /// Every regular file under `folder` that holds `secret`: in its bytes, in the base64 body of
    /// any PEM block, or as an unencrypted private key that OpenSSL reads (paths relative to
    /// `folder`, sorted). What a thief with the folder and no passphrase could take a key from.
    static func files(under folder: URL, holding secret: [UInt8]) throws -> [String] {
        var found: [String] = []
        let enumerator = try #require(FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey]))
        for case let url as URL in enumerator where (try url.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true {
            let bytes = Array(try Data(contentsOf: url))
            let text = String(decoding: bytes, as: UTF8.self)
            var decoded = [bytes]
            for block in text.components(separatedBy: "-----BEGIN ").dropFirst() {
                let body = block.split(separator: "\n").dropFirst().prefix { !$0.hasPrefix("-----END") }.joined()
                if let der = Data(base64Encoded: body) { decoded.append(Array(der)) }
            }
            let parsed = (try? Ed25519PrivateKey(pemRepresentation: text)).map { try? seed(of: $0) } ?? nil
            if decoded.contains(where: { contains($0, secret) }) || parsed == secret {
                found.append(String(url.path.dropFirst(folder.path.count + 1)))
            }
        }
        OpenSSLErrorQueue.clear()
        return found.sorted()
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    /// Rewrites `ca.key` the way Hearth stored it before issue 14: unencrypted PKCS#8.
    static func writeOldLayout(_ store: AccountStore, _ id: AccountID, key: Ed25519PrivateKey) throws {
        let file = store.directory.appendingPathComponent("accounts/\(id.hex)/ca.key")
        try Data(try key.pemRepresentation().utf8).write(to: file)
    }

    @Test("After createAccount no file of the config folder holds a private key in the clear but device.key")
    func noClearKeyButTheDevice() throws {
        let root = makeTemporaryDirectory()
        defer { removeTemporaryDirectory(root) }
        let (store, identity) = try Self.member(root)
        let id = identity.account.id
        let folder = store.directory
        let caSeed = try Self.seed(of: try store.loadAuthority(id, passphrase: Self.passphrase).privateKey)
        let deviceSeed = try Self.seed(of: identity.privateKey)
        let accountFiles = try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("accounts/\(id.hex)").path).sorted()
        #expect(accountFiles == ["ca.key", "ca.pem", "device.key", "device.pem"])

        #expect(try Self.files(under: folder, holding: caSeed) == [])
        #expect(try Self.files(under: folder, holding: deviceSeed) == ["accounts/\(id.hex)/device.key"])
        let caKey = try String(contentsOf: folder.appendingPathComponent("accounts/\(id.hex)/ca.key"), encoding: .utf8)
        #expect(caKey.hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        #expect(try store.caKeyStatus(id) == .protected(.testing))
        // The join bundle carries the key as stored: sealed too.
        #expect(!Self.contains(Array(try store.exportJoinBundle(id)), caSeed))

        // The scan finds a key in the clear: written the old way, ca.key is reported.
        try Self.writeOldLayout(store, id, key: try store.loadAuthority(id, passphrase: Self.passphrase).privateKey)
        #expect(try Self.files(under: folder, holding: caSeed) == ["accounts/\(id.hex)/ca.key"])
    }

    @Test("By default the CA key is sealed with scrypt N = 2^18, r = 8, p = 1, and the status says so without deriving")
    func standardCost() async throws {
        let root = makeTemporaryDirectory()
        defer { removeTemporaryDirectory(root) }
        let store = AccountStore(directory: root, logger: Logger(label: "test"))
        // One derivation (a second, 256 MiB): off the cooperative pool, as JoinBundleKDFTests explains.
        let identity = try await JoinBundleKDFTests.offPool {
            try store.createAccount(displayName: "Home", passphrase: Self.passphrase, deviceName: "pc")
        }
        #expect(try store.caKeyStatus(identity.account.id) == .protected(.standard))
        #expect(ScryptParameters.standard == ScryptParameters(n: 1 << 18, r: 8, p: 1))
        // The device identity loads without the passphrase, and without deriving anything.
        let clock = ContinuousClock()
        let start = clock.now
        #expect(try store.loadCurrentIdentity()?.deviceID == identity.deviceID)
        print("loading the device identity took \(clock.now - start) (no scrypt)")
    }

    @Test("A copy of the whole config folder without the passphrase cannot load the CA key, and its device key cannot issue a certificate the account accepts")
    func stolenFolderCannotAdmit() throws {
        let root = makeTemporaryDirectory()
        defer { removeTemporaryDirectory(root) }
        let (store, identity) = try Self.member(root)
        let account = identity.account
        let stolen = root.appendingPathComponent("stolen")
        try FileManager.default.copyItem(at: store.directory, to: stolen)
        let thief = AccountStore(directory: stolen, logger: Logger(label: "test"), scrypt: .testing)

        // The device itself works without the passphrase (what a stolen device can do: sync as itself).
        let device = try #require(try thief.loadCurrentIdentity())
        #expect(device.deviceID == identity.deviceID)
        for guess in ["", "wrong", "tidy kettle orbit lunar sketch", Self.passphrase + " "] {
            let error = #expect(throws: IdentityError.self, "\(guess)") { try thief.loadAuthority(account.id, passphrase: guess) }
            #expect(error?.code == .wrongPassphrase, "\(guess)")
        }

        // A newcomer's certificate signed with the device key, naming the account CA as issuer.
        let newcomer = try Ed25519PrivateKey()
        let forged = try CertificateIssuer.issue(kind: .device, commonName: "intruder", organization: account.id.hex,
                                                 publicKey: newcomer.publicKey, issuer: account.caCertificate, signingKey: device.privateKey)
        #expect(forged.issuerCommonName == account.displayName)
        let refused = #expect(throws: IdentityError.self) { try account.trust.validateDevice(forged) }
        #expect(refused?.code == .certificateRejected)
        // A CA of the same name made with the device key, and a certificate from it.
        let fakeCA = try CertificateIssuer.issue(kind: .authority, commonName: account.displayName,
                                                 publicKey: device.privateKey.publicKey, issuer: nil, signingKey: device.privateKey)
        let fromFake = try CertificateIssuer.issue(kind: .device, commonName: "intruder", organization: account.id.hex,
                                                   publicKey: newcomer.publicKey, issuer: fakeCA, signingKey: device.privateKey)
        #expect((#expect(throws: IdentityError.self) { try account.trust.validateDevice(fromFake) })?.code == .certificateRejected)
        // The device's own certificate cannot act as a CA either.
        let fromDevice = try CertificateIssuer.issue(kind: .device, commonName: "intruder", organization: account.id.hex,
                                                     publicKey: newcomer.publicKey, issuer: device.certificate, signingKey: device.privateKey)
        #expect((#expect(throws: IdentityError.self) { try account.trust.validateDevice(fromDevice) })?.code == .certificateRejected)

        // A bundle made from the copy needs the passphrase to join.
        let bundle = try thief.exportJoinBundle(account.id)
        let elsewhere = AccountStore(directory: root.appendingPathComponent("elsewhere"), logger: Logger(label: "test"), scrypt: .testing)
        #expect((#expect(throws: IdentityError.self) { try elsewhere.importJoinBundle(bundle, passphrase: "wrong") })?.code == .wrongPassphrase)
        #expect(try elsewhere.accounts().isEmpty)

        // The checks do catch a certificate the account accepts: with the passphrase, the copy admits one.
        let authority = try thief.loadAuthority(account.id, passphrase: Self.passphrase)
        let admitted = try authority.issueDeviceCertificate(for: newcomer.publicKey, deviceName: "newcomer")
        #expect(try account.trust.validateDevice(admitted) == DeviceID(publicKey: newcomer.publicKey))
    }

    @Test("An account written the old way (clear ca.key) is detected and refused; protectAuthority seals it in place, the clear bytes are gone, the device is unchanged")
    func migration() throws {
        let root = makeTemporaryDirectory()
        defer { removeTemporaryDirectory(root) }
        let (store, identity) = try Self.member(root)
        let id = identity.account.id
        let caKey = try store.loadAuthority(id, passphrase: Self.passphrase).privateKey
        try Self.writeOldLayout(store, id, key: caKey)
        let file = store.directory.appendingPathComponent("accounts/\(id.hex)/ca.key")
        let clearSize = try Data(contentsOf: file).count

        #expect(try store.caKeyStatus(id) == .clear)
        #expect((#expect(throws: IdentityError.self) { try store.loadAuthority(id, passphrase: Self.passphrase) })?.code == .caKeyInClear)
        #expect((#expect(throws: IdentityError.self) { try store.exportJoinBundle(id) })?.code == .caKeyInClear)
        #expect((#expect(throws: IdentityError.self) { try store.protectAuthority(id, passphrase: "") })?.code == .invalidArgument)
        #expect(try store.caKeyStatus(id) == .clear)

        // Held open across the migration: the replaced file, to see what is left of it.
        let replaced = open(file.path, O_RDONLY)
        try #require(replaced >= 0)
        defer { close(replaced) }

        let newPassphrase = "a new account passphrase for the old household"
        #expect(try store.protectAuthority(id, passphrase: newPassphrase))
        #expect(try store.caKeyStatus(id) == .protected(.testing))
        #expect(try String(contentsOf: file, encoding: .utf8).hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        #expect(try Self.files(under: store.directory, holding: try Self.seed(of: caKey)) == [])
        // No temporary file left, nothing but the four files.
        #expect(try FileManager.default.contentsOfDirectory(atPath: file.deletingLastPathComponent().path).sorted()
                == ["ca.key", "ca.pem", "device.key", "device.pem"])
        #expect(fileMode(file) == 0o600)
        // The clear file was replaced (a new inode), and its bytes overwritten with zeros.
        var before = stat(), after = stat()
        #expect(fstat(replaced, &before) == 0 && stat(file.path, &after) == 0)
        #expect(before.st_ino != after.st_ino && before.st_nlink == 0)
        var old = [UInt8](repeating: 0xFF, count: clearSize)
        #expect(pread(replaced, &old, clearSize, 0) == clearSize)
        #expect(old.allSatisfy { $0 == 0 })

        // The new passphrase opens the same CA key; the old one does not; the device is the same.
        #expect(try store.loadAuthority(id, passphrase: newPassphrase).privateKey.publicKey == caKey.publicKey)
        #expect((#expect(throws: IdentityError.self) { try store.loadAuthority(id, passphrase: Self.passphrase) })?.code == .wrongPassphrase)
        let device = try #require(try store.loadCurrentIdentity())
        #expect(device.deviceID == identity.deviceID && device.certificate == identity.certificate)
        // Protecting again changes nothing: the right passphrase is confirmed, another refused.
        #expect(try store.protectAuthority(id, passphrase: newPassphrase) == false)
        #expect((#expect(throws: IdentityError.self) { try store.protectAuthority(id, passphrase: "another") })?.code == .wrongPassphrase)
    }

    @Test("Joining with a bundle stores the account's sealed CA key; the joiner opens it with the account passphrase and can admit a device")
    func joinStoresTheSealedKey() throws {
        let root = makeTemporaryDirectory()
        defer { removeTemporaryDirectory(root) }
        let (laptop, owner) = try Self.member(root)
        let id = owner.account.id
        let bundle = try laptop.exportJoinBundle(id)
        let kitchen = AccountStore(directory: root.appendingPathComponent("kitchen"), logger: Logger(label: "test"), scrypt: .testing)
        let joined = try kitchen.importJoinBundle(bundle, passphrase: Self.passphrase, deviceName: "kitchen")
        #expect(joined.account.id == id)
        // The same sealed bytes as the member's: no passphrase of its own, no new salt.
        let stored = { (store: AccountStore) in try Data(contentsOf: store.directory.appendingPathComponent("accounts/\(id.hex)/ca.key")) }
        #expect(try stored(kitchen) == stored(laptop))
        #expect(try kitchen.caKeyStatus(id) == .protected(.testing))
        let authority = try kitchen.loadAuthority(id, passphrase: Self.passphrase)
        let admitted = try authority.makeDevice(named: "tablet")
        #expect(try owner.account.trust.validateDevice(admitted.certificate) == admitted.deviceID)
        #expect((#expect(throws: IdentityError.self) { try kitchen.loadAuthority(id, passphrase: "wrong") })?.code == .wrongPassphrase)
    }

    @Test("Bundles of the old kind (sealed under a passphrase of their own) still open; one sealed more cheaply than the joiner seals is sealed again")
    func oldBundles() throws {
        let root = makeTemporaryDirectory()
        defer { removeTemporaryDirectory(root) }
        let authority = try AccountAuthority.create(displayName: "Old household")
        // A store that seals at N = 2^12 stands for one at 2^18 receiving an N = 2^14 bundle,
        // without paying for 2^18.
        let sealing = ScryptParameters(n: 1 << 12, r: 8, p: 1)
        func joiner(_ name: String) -> AccountStore { AccountStore(directory: root.appendingPathComponent(name), logger: Logger(label: "test"), scrypt: sealing) }
        func storedKey(_ store: AccountStore) throws -> String {
            try String(contentsOf: store.directory.appendingPathComponent("accounts/\(authority.account.id.hex)/ca.key"), encoding: .utf8)
        }

        // Sealed more cheaply (N = 2^10) than the joiner seals: opened, then sealed again at 2^12 under the same passphrase.
        let cheap = try JoinBundle.export(authority, passphrase: "the old bundle's own passphrase", scrypt: .testing)
        let first = joiner("first")
        try first.importJoinBundle(cheap, passphrase: "the old bundle's own passphrase", deviceName: "first")
        #expect(try first.caKeyStatus(authority.account.id) == .protected(sealing))
        #expect(try first.loadAuthority(authority.account.id, passphrase: "the old bundle's own passphrase").privateKey.publicKey
                == authority.privateKey.publicKey)

        // Sealed at N = 2^14, costlier than 2^12: stored exactly as the bundle has it.
        let older = try JoinBundle.export(authority, passphrase: "pw", scrypt: ScryptParameters(n: 1 << 14, r: 8, p: 1))
        let second = joiner("second")
        try second.importJoinBundle(older, passphrase: "pw", deviceName: "second")
        #expect(try second.caKeyStatus(authority.account.id) == .protected(ScryptParameters(n: 1 << 14, r: 8, p: 1)))
        let olderText = String(decoding: older, as: UTF8.self)
        #expect(olderText.hasSuffix(try storedKey(second)))
        #expect((#expect(throws: IdentityError.self) { try second.importJoinBundle(older, passphrase: "wrong") })?.code == .wrongPassphrase)

        // A device that already holds the account in the old, clear way takes the bundle's sealed key.
        let third = joiner("third")
        let device = try third.importJoinBundle(older, passphrase: "pw", deviceName: "third")
        try Self.writeOldLayout(third, authority.account.id, key: authority.privateKey)
        #expect(try third.caKeyStatus(authority.account.id) == .clear)
        #expect(try third.importJoinBundle(older, passphrase: "pw").deviceID == device.deviceID)
        #expect(try third.caKeyStatus(authority.account.id) == .protected(ScryptParameters(n: 1 << 14, r: 8, p: 1)))
    }

    @Test("A device without a CA key (as a paired device will be) loads its identity; admitting, exporting and protecting say the key is absent")
    func absentKey() throws {
        let root = makeTemporaryDirectory()
        defer { removeTemporaryDirectory(root) }
        let (store, identity) = try Self.member(root)
        let id = identity.account.id
        try FileManager.default.removeItem(at: store.directory.appendingPathComponent("accounts/\(id.hex)/ca.key"))
        #expect(try store.caKeyStatus(id) == .absent)
        #expect(try store.loadCurrentIdentity()?.deviceID == identity.deviceID)
        #expect((#expect(throws: IdentityError.self) { try store.loadAuthority(id, passphrase: Self.passphrase) })?.code == .caKeyAbsent)
        #expect((#expect(throws: IdentityError.self) { try store.exportJoinBundle(id) })?.code == .caKeyAbsent)
        #expect((#expect(throws: IdentityError.self) { try store.protectAuthority(id, passphrase: Self.passphrase) })?.code == .caKeyAbsent)
        // Damaged is not absent.
        try Data("not a key\n".utf8).write(to: store.directory.appendingPathComponent("accounts/\(id.hex)/ca.key"))
        #expect((#expect(throws: IdentityError.self) { try store.caKeyStatus(id) })?.code == .damagedAccount)
        #expect((#expect(throws: IdentityError.self) { try store.caKeyStatus(AccountID(caPublicKey: try Ed25519PrivateKey().publicKey)) })?.code
                == .unknownAccount)
    }
}
