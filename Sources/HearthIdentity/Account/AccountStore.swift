import Foundation
import Logging

/// The accounts this user has on this device, in the user's config directory, shared by
/// every app of the user (like the system's iCloud account).
///
/// Layout (directories mode 0700, files mode 0600, every file replaced atomically):
///
/// ```text
/// $XDG_CONFIG_HOME/hearth/            (fallback ~/.config/hearth/)
///   current                           hex account ID of the signed-in account; absent when signed out
///   accounts/<account ID hex>/
///     ca.pem                          the account CA certificate
///     ca.key                          the account CA private key (PKCS#8 PEM)       secret
///     device.key                      this device's private key for the account     secret
///     device.pem                      this device's certificate, signed by the CA
/// ```
///
/// Each account has its own device key, so a device's ID in one household cannot be
/// linked to its ID in another. Signing out removes only the `current` pointer: the
/// account stays on disk and signing in again restores the same device ID.
///
/// Stateless apart from the files, so any number of processes may use the same directory;
/// apps learn of a switch by re-reading ``currentAccountID()``.
public struct AccountStore: Sendable {
    public let directory: URL
    private let logger: Logger

    /// A store in `directory` (tests pass a temporary directory).
    public init(directory: URL, logger: Logger = Logger(label: "hearth.identity")) {
        self.directory = directory
        self.logger = logger
    }

    /// The store in the user's config directory.
    public init(logger: Logger = Logger(label: "hearth.identity")) {
        self.init(directory: Self.defaultDirectory(), logger: logger)
    }

    /// `$XDG_CONFIG_HOME/hearth`, or `~/.config/hearth` when the variable is unset, empty
    /// or relative (as the XDG base directory specification says).
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return URL(fileURLWithPath: config, isDirectory: true).appendingPathComponent("hearth", isDirectory: true)
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home, isDirectory: true)
            .appendingPathComponent(".config", isDirectory: true)
            .appendingPathComponent("hearth", isDirectory: true)
    }

    // MARK: Paths

    private var currentFile: URL { directory.appendingPathComponent("current") }
    private var accountsDirectory: URL { directory.appendingPathComponent("accounts", isDirectory: true) }
    private func accountDirectory(_ id: AccountID) -> URL { accountsDirectory.appendingPathComponent(id.hex, isDirectory: true) }

    // MARK: Accounts

    /// Creates a new account (a new household) with this device as its first member, and
    /// signs in to it.
    @discardableResult
    public func createAccount(displayName: String, deviceName: String = Self.defaultDeviceName) throws -> DeviceIdentity {
        let authority = try AccountAuthority.create(displayName: displayName)
        let identity = try authority.makeDevice(named: deviceName)
        try save(authority: authority, device: identity)
        try signIn(authority.account.id)
        logger.info("created account", metadata: ["account": "\(authority.account.id.short)", "device": "\(identity.deviceID.short)"])
        return identity
    }

    /// The accounts stored on this device.
    public func accounts() throws -> [Account] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: accountsDirectory.path) else { return [] }
        return try names.compactMap { AccountID(hex: $0) }.sorted().map { try loadAccount($0) }
    }

    /// The signed-in account's ID, or nil when signed out.
    public func currentAccountID() throws -> AccountID? {
        guard let bytes = try SecureFile.read(currentFile) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let id = AccountID(hex: text) else {
            throw IdentityError(code: .damagedAccount, message: "\(currentFile.path) does not hold an account ID")
        }
        return id
    }

    /// Makes `id` the current account. Signing in to another account while signed in is
    /// a switch.
    public func signIn(_ id: AccountID) throws {
        _ = try loadAccount(id)  // only point at an account that exists
        try SecureFile.write(Array((id.hex + "\n").utf8), to: currentFile)
        logger.info("signed in", metadata: ["account": "\(id.short)"])
    }

    /// Switches to `id` (the same as ``signIn(_:)``; named for the command line).
    public func switchAccount(to id: AccountID) throws { try signIn(id) }

    /// Signs out: no current account. The account's files stay.
    public func signOut() throws {
        try SecureFile.remove(currentFile)
        logger.info("signed out")
    }

    /// Deletes an account's files from this device, signing out first if it is current.
    public func removeAccount(_ id: AccountID) throws {
        if try currentAccountID() == id { try signOut() }
        let dir = accountDirectory(id)
        for name in ["device.key", "device.pem", "ca.key", "ca.pem"] {
            try SecureFile.remove(dir.appendingPathComponent(name))
        }
        if rmdir(dir.path) != 0 && errno != ENOENT { throw IdentityError.fileSystem("removing", path: dir.path) }
    }

    /// The account `id` (public parts only).
    public func loadAccount(_ id: AccountID) throws -> Account {
        let certificate = try Certificate(pemEncoded: try readText("ca.pem", of: id))
        let account = try Account(caCertificate: certificate)
        guard account.id == id else {
            throw IdentityError(code: .damagedAccount, message: "the CA certificate in \(accountDirectory(id).path) is another account's")
        }
        return account
    }

    /// The account `id` with its CA key (to export it or admit devices).
    public func loadAuthority(_ id: AccountID) throws -> AccountAuthority {
        try AccountAuthority(account: loadAccount(id), privateKey: Ed25519PrivateKey(pemRepresentation: readText("ca.key", of: id)))
    }

    /// This device's identity in account `id`.
    public func loadIdentity(_ id: AccountID) throws -> DeviceIdentity {
        let account = try loadAccount(id)
        let key = try Ed25519PrivateKey(pemRepresentation: readText("device.key", of: id))
        let certificate = try Certificate(pemEncoded: readText("device.pem", of: id))
        let identity = try DeviceIdentity(account: account, privateKey: key, certificate: certificate)
        try account.trust.validateDevice(certificate)
        return identity
    }

    /// This device's identity in the current account, or nil when signed out.
    public func loadCurrentIdentity() throws -> DeviceIdentity? {
        guard let id = try currentAccountID() else { return nil }
        return try loadIdentity(id)
    }

    // MARK: Join bundles

    /// The join bundle of account `id`, sealed under `passphrase`.
    public func exportJoinBundle(_ id: AccountID, passphrase: String) throws -> Data {
        try JoinBundle.export(loadAuthority(id), passphrase: passphrase)
    }

    /// The same with chosen scrypt parameters (``ScryptParameters/testing`` for test
    /// clusters that join many devices).
    package func exportJoinBundle(_ id: AccountID, passphrase: String, scrypt: ScryptParameters) throws -> Data {
        try JoinBundle.export(loadAuthority(id), passphrase: passphrase, scrypt: scrypt)
    }

    /// Joins the account in `bundle`: stores its CA, makes this device's key and
    /// certificate for it, and signs in to it. Joining an account already stored keeps
    /// the existing device identity.
    ///
    /// - Throws: ``IdentityError/Code/wrongPassphrase``, ``IdentityError/Code/damagedBundle``
    ///   or ``IdentityError/Code/keyDerivationRefused``.
    @discardableResult
    public func importJoinBundle(_ bundle: Data, passphrase: String, deviceName: String = Self.defaultDeviceName) throws -> DeviceIdentity {
        let authority = try JoinBundle.open(bundle, passphrase: passphrase)
        let id = authority.account.id
        if let existing = try? loadIdentity(id) {
            try signIn(id)
            return existing
        }
        let identity = try authority.makeDevice(named: deviceName)
        try save(authority: authority, device: identity)
        try signIn(id)
        logger.info("joined account", metadata: ["account": "\(id.short)", "device": "\(identity.deviceID.short)"])
        return identity
    }

    /// The host name, the default name of this device in its certificate.
    public static var defaultDeviceName: String {
        let name = ProcessInfo.processInfo.hostName
        return name.isEmpty ? "device" : name
    }

    // MARK: Files

    private func save(authority: AccountAuthority, device: DeviceIdentity) throws {
        let dir = accountDirectory(authority.account.id)
        try SecureFile.write(Array(authority.account.caCertificate.pemEncoded.utf8), to: dir.appendingPathComponent("ca.pem"))
        try SecureFile.write(Array(try authority.privateKey.pemRepresentation().utf8), to: dir.appendingPathComponent("ca.key"))
        try SecureFile.write(Array(try device.privateKey.pemRepresentation().utf8), to: dir.appendingPathComponent("device.key"))
        try SecureFile.write(Array(device.certificate.pemEncoded.utf8), to: dir.appendingPathComponent("device.pem"))
    }

    private func readText(_ name: String, of id: AccountID) throws -> String {
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
