import Foundation

/// The files of an ``AccountStore``: where each lives, and reading and writing each one.
/// What they mean (signing in, sealing the CA key, joining) is ``AccountStore``'s.
///
/// Layout (directories mode 0700, files mode 0600, every file replaced atomically):
///
/// ```text
/// $XDG_CONFIG_HOME/hearth/            (fallback ~/.config/hearth/)
///   current                           hex account ID of the signed-in account; absent when signed out
///   accounts/<account ID hex>/
///     ca.pem                          the account CA certificate
///     ca.key                          the account CA private key, encrypted         secret, sealed
///                                     under the account passphrase (may be absent)
///     device.key                      this device's private key for the account     secret
///     device.pem                      this device's certificate, signed by the CA
///     removals, devices               the account's device removals and devices met (``DeviceRemovals``, ``KnownDevices``)
/// ```
struct AccountFiles: Sendable {
    let directory: URL

    private var currentFile: URL { directory.appendingPathComponent("current") }
    private var accountsDirectory: URL { directory.appendingPathComponent("accounts", isDirectory: true) }
    func accountDirectory(_ id: AccountID) -> URL { accountsDirectory.appendingPathComponent(id.hex, isDirectory: true) }

    /// The file that keeps the device removals of account `id`.
    func removalsFile(of id: AccountID) -> URL {
        accountDirectory(id).appendingPathComponent("removals")
    }

    /// The file that keeps the devices of account `id` met on this device.
    func knownDevicesFile(of id: AccountID) -> URL {
        accountDirectory(id).appendingPathComponent("devices")
    }

    // MARK: The current account

    /// The IDs of the accounts that have a directory here, in order.
    func accountIDs() -> [AccountID] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: accountsDirectory.path) else { return [] }
        return names.compactMap { AccountID(hex: $0) }.sorted()
    }

    /// What `current` names, or nil when it is absent (signed out).
    func readCurrent() throws -> AccountID? {
        guard let bytes = try SecureFile.read(currentFile) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let id = AccountID(hex: text) else {
            throw IdentityError(code: .damagedAccount, message: "\(currentFile.path) does not hold an account ID")
        }
        return id
    }

    func writeCurrent(_ id: AccountID) throws {
        try SecureFile.write(Array((id.hex + "\n").utf8), to: currentFile)
    }

    func removeCurrent() throws {
        try SecureFile.remove(currentFile)
    }

    // MARK: An account's files

    /// Writes an account's files; with no `sealedKey`, `ca.key` is left as it is (absent on a new account).
    func save(account: Account, sealedKey: EncryptedPrivateKeyInfo?, device: DeviceIdentity) throws {
        let dir = accountDirectory(account.id)
        try SecureFile.write(Array(account.caCertificate.pemEncoded.utf8), to: dir.appendingPathComponent("ca.pem"))
        if let sealedKey { try writeCAKey(sealedKey, of: account.id, scrubbingReplaced: false) }
        try SecureFile.write(Array(try device.privateKey.pemRepresentation().utf8), to: dir.appendingPathComponent("device.key"))
        try writeDeviceCertificate(device.certificate, of: account.id)
    }

    func writeDeviceCertificate(_ certificate: Certificate, of id: AccountID) throws {
        try SecureFile.write(Array(certificate.pemEncoded.utf8), to: accountDirectory(id).appendingPathComponent("device.pem"))
    }

    func writeCAKey(_ sealed: EncryptedPrivateKeyInfo, of id: AccountID, scrubbingReplaced: Bool) throws {
        try SecureFile.write(Array(sealed.pem.utf8), to: accountDirectory(id).appendingPathComponent("ca.key"),
                             scrubbingReplaced: scrubbingReplaced)
    }

    /// Deletes account `id`'s keys and certificates, and its directory once empty.
    func removeAccount(_ id: AccountID) throws {
        let dir = accountDirectory(id)
        for name in ["device.key", "device.pem", "ca.key", "ca.pem"] {
            try SecureFile.remove(dir.appendingPathComponent(name))
        }
        if rmdir(dir.path) != 0 && errno != ENOENT { throw IdentityError.fileSystem("removing", path: dir.path) }
    }

    /// What `ca.key` holds. Only parsed: nothing is derived or decrypted.
    enum StoredCAKey {
        case sealed(EncryptedPrivateKeyInfo)
        case clear(Ed25519PrivateKey)
        case absent
    }

    func storedCAKey(_ id: AccountID) throws -> StoredCAKey {
        let url = accountDirectory(id).appendingPathComponent("ca.key")
        guard let bytes = try SecureFile.read(url) else { return .absent }
        let text = String(decoding: bytes, as: UTF8.self)
        if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
            do {
                return .sealed(try EncryptedPrivateKeyInfo(pem: text))
            } catch where error.code == .keyDerivationRefused {
                throw IdentityError(code: .keyDerivationRefused, message: "\(url.path): \(error.message)")
            } catch {
                throw IdentityError(code: .damagedAccount, message: "\(url.path) is damaged: \(error.message)")
            }
        }
        if text.contains("-----BEGIN PRIVATE KEY-----"), let key = try? Ed25519PrivateKey(pemRepresentation: text) {
            return .clear(key)
        }
        OpenSSLErrorQueue.clear()
        throw IdentityError(code: .damagedAccount, message: "\(url.path) holds no readable CA key")
    }

    /// The text of file `name` of account `id`.
    ///
    /// - Throws: ``IdentityError/Code/unknownAccount`` when the account has no directory,
    ///   ``IdentityError/Code/damagedAccount`` when it lacks the file.
    func readText(_ name: String, of id: AccountID) throws -> String {
        let url = accountDirectory(id).appendingPathComponent(name)
        guard let bytes = try SecureFile.read(url) else {
            if !FileManager.default.fileExists(atPath: accountDirectory(id).path) {
                throw IdentityError(code: .unknownAccount, message: "no account \(id.short) on this device")
            }
            throw IdentityError(code: .damagedAccount, message: "\(url.path) is missing")
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
