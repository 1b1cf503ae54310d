import Foundation
import Logging

/// The accounts this user has on this device, in the user's config directory, shared by
/// every app of the user (like the system's iCloud account).
///
/// Its files, one directory per account, are ``AccountFiles``'s.
///
/// Each account has its own device key, so a device's ID in one household cannot be
/// linked to its ID in another. Signing out removes only the `current` pointer: the
/// account stays on disk and signing in again restores the same device ID.
///
/// The device key is stored unencrypted, because apps use it without a prompt; the CA key,
/// which admits devices, is sealed under the account passphrase (PKCS#8, scrypt and
/// AES-256-CBC, the format of join bundles), which is stored nowhere. Loading the device
/// identity never needs the passphrase; ``loadAuthority(_:passphrase:)`` does. Accounts
/// written before hold the CA key in the clear: ``caKeyStatus(_:)`` says so and
/// ``protectAuthority(_:passphrase:)`` encrypts it.
///
/// Stateless apart from the files, so any number of processes may use the same directory;
/// apps learn of a switch by re-reading ``currentAccountID()``.
package struct AccountStore: Sendable {
    /// Where the account files are, and reading and writing each.
    let files: AccountFiles
    package var directory: URL { files.directory }
    let logger: Logger
    /// The scrypt cost of the CA keys this store seals (``ScryptParameters/standard`` unless
    /// a test chose cheaper ones). What it reads is bounded by ``ScryptParameters/maximum``
    /// whatever this is.
    package let scrypt: ScryptParameters
    /// The device's removals and known devices, one instance per file (``removals(of:)``): a
    /// device passes its own, so that every store and engine of it honours a removal at once.
    /// By default this store's own table: nothing is shared beyond the values made from it.
    package let records: HouseholdRecords
    /// The device's watcher of account directories, which its engines follow the `removals`
    /// file with; nil: nothing follows it (a command that reads the files once).
    package let watcher: AccountDirectoryWatcher?

    /// A store in `directory` (tests pass a temporary directory).
    package init(directory: URL, logger: Logger) {
        self.init(directory: directory, logger: logger, scrypt: .standard)
    }

    /// A store that seals CA keys with `scrypt`: ``ScryptParameters/testing`` for tests,
    /// which create accounts by the hundred and cannot pay a second and 256 MiB for each.
    package init(directory: URL, logger: Logger, scrypt: ScryptParameters) {
        self.init(directory: directory, logger: logger, scrypt: scrypt, records: HouseholdRecords(), watcher: nil)
    }

    /// A store of one device: its records and its watcher (``records``, ``watcher``).
    package init(directory: URL, logger: Logger, scrypt: ScryptParameters = .standard, records: HouseholdRecords,
                 watcher: AccountDirectoryWatcher?) {
        precondition(scrypt.isWithinMaximum, "scrypt \(scrypt) is beyond what readers accept")
        files = AccountFiles(directory: directory)
        self.logger = logger
        self.scrypt = scrypt
        self.records = records
        self.watcher = watcher
    }

    /// The store in the user's config directory.
    package init(logger: Logger) {
        self.init(directory: Self.defaultDirectory(), logger: logger)
    }

    /// `$XDG_CONFIG_HOME/hearth`, or `~/.config/hearth` when the variable is unset, empty
    /// or relative (as the XDG base directory specification says).
    package static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return URL(fileURLWithPath: config, isDirectory: true).appendingPathComponent("hearth", isDirectory: true)
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home, isDirectory: true)
            .appendingPathComponent(".config", isDirectory: true)
            .appendingPathComponent("hearth", isDirectory: true)
    }

    func accountDirectory(_ id: AccountID) -> URL { files.accountDirectory(id) }

    // MARK: Accounts

    /// Creates a new account (a new household) with this device as its first member, and
    /// signs in to it.
    ///
    /// The CA private key is written encrypted under `passphrase`, the account passphrase,
    /// which is stored nowhere: it is needed to admit or remove devices (and by each device
    /// that joins), never to use the account. Sealing costs one scrypt derivation (about a
    /// second and 256 MiB with ``ScryptParameters/standard``).
    ///
    /// - Throws: ``IdentityError/Code/invalidArgument`` when `passphrase` is empty.
    @discardableResult
    package func createAccount(displayName: String, passphrase: String, deviceName: String = Self.defaultDeviceName) throws -> DeviceIdentity {
        guard !passphrase.isEmpty else { throw IdentityError(code: .invalidArgument, message: "the account passphrase is empty") }
        let authority = try AccountAuthority.create(displayName: displayName)
        let identity = try authority.makeDevice(named: deviceName)
        let sealed = try authority.privateKey.sealed(passphrase: passphrase, scrypt: scrypt)
        try files.save(account: authority.account, sealedKey: sealed, device: identity)
        try signIn(authority.account.id)
        logger.info("created account", metadata: ["account": "\(authority.account.id.short)", "device": "\(identity.deviceID.short)"])
        return identity
    }

    /// The accounts stored on this device.
    package func accounts() throws -> [Account] {
        try files.accountIDs().map { try loadAccount($0) }
    }

    /// The signed-in account's ID, or nil when signed out.
    package func currentAccountID() throws -> AccountID? {
        try files.readCurrent()
    }

    /// Makes `id` the current account. Signing in to another account while signed in is
    /// a switch.
    package func signIn(_ id: AccountID) throws {
        _ = try loadAccount(id)  // only point at an account that exists
        try files.writeCurrent(id)
        logger.info("signed in", metadata: ["account": "\(id.short)"])
    }

    /// Switches to `id` (the same as ``signIn(_:)``; named for the command line).
    package func switchAccount(to id: AccountID) throws { try signIn(id) }

    /// Signs out: no current account. The account's files stay.
    package func signOut() throws {
        try files.removeCurrent()
        logger.info("signed out")
    }

    /// Deletes an account's files from this device, signing out first if it is current.
    package func removeAccount(_ id: AccountID) throws {
        if try currentAccountID() == id { try signOut() }
        try files.removeAccount(id)
    }

    /// The account `id` (public parts only).
    package func loadAccount(_ id: AccountID) throws -> Account {
        let certificate = try Certificate(pemEncoded: try files.readText("ca.pem", of: id))
        let account = try Account(caCertificate: certificate)
        guard account.id == id else {
            throw IdentityError(code: .damagedAccount, message: "the CA certificate in \(accountDirectory(id).path) is another account's")
        }
        return account
    }

    /// The account `id` with its CA key, decrypted with the account passphrase: what admits
    /// or removes devices. Costs one scrypt derivation (about a second and 256 MiB).
    ///
    /// - Throws: ``IdentityError/Code/wrongPassphrase`` when `passphrase` does not open the
    ///   key; ``IdentityError/Code/caKeyAbsent`` when this device holds no CA key for the
    ///   account; ``IdentityError/Code/caKeyInClear`` when the key is stored unencrypted
    ///   (``protectAuthority(_:passphrase:)`` first); ``IdentityError/Code/unknownAccount``,
    ///   ``IdentityError/Code/damagedAccount``.
    package func loadAuthority(_ id: AccountID, passphrase: String) throws -> AccountAuthority {
        let account = try loadAccount(id)
        let sealed: EncryptedPrivateKeyInfo
        switch try files.storedCAKey(id) {
        case .sealed(let key): sealed = key
        case .clear: throw Self.inClear(id)
        case .absent: throw Self.absent(id)
        }
        return try unseal(sealed, of: account, passphrase: passphrase)
    }

    /// How this device holds the CA key of account `id`: encrypted (with which scrypt
    /// parameters), in the clear (an account written before Hearth encrypted it), or not at
    /// all. Runs no key derivation: the file is only parsed.
    ///
    /// - Throws: ``IdentityError/Code/unknownAccount``; ``IdentityError/Code/damagedAccount``
    ///   when `ca.key` holds neither kind of key.
    package func caKeyStatus(_ id: AccountID) throws -> CAKeyStatus {
        _ = try loadAccount(id)
        switch try files.storedCAKey(id) {
        case .sealed(let key): return .protected(key.parameters)
        case .clear: return .clear
        case .absent: return .absent
        }
    }

    /// Encrypts the CA key of account `id`, stored in the clear by an earlier Hearth, under
    /// the account passphrase `passphrase` (the migration to sealed CA keys).
    ///
    /// The new `ca.key` replaces the clear one atomically (temporary file, fsync, rename), so
    /// a crash leaves one or the other, never neither; the replaced file's bytes are then
    /// overwritten with zeros unless another link to it exists (best effort: a copy-on-write
    /// file system, an SSD or a backup may still hold the clear key). The device identity is
    /// untouched. Sealing costs one scrypt derivation.
    ///
    /// - Returns: true when a clear key was encrypted; false when the key was encrypted
    ///   already, and `passphrase` opens it (checked: one more derivation).
    /// - Throws: ``IdentityError/Code/caKeyAbsent`` when there is no CA key here;
    ///   ``IdentityError/Code/wrongPassphrase`` when the key is already encrypted under
    ///   another passphrase; ``IdentityError/Code/invalidArgument`` when `passphrase` is empty;
    ///   ``IdentityError/Code/damagedAccount`` when the clear key is not the CA's.
    @discardableResult
    package func protectAuthority(_ id: AccountID, passphrase: String) throws -> Bool {
        guard !passphrase.isEmpty else { throw IdentityError(code: .invalidArgument, message: "the account passphrase is empty") }
        let account = try loadAccount(id)
        switch try files.storedCAKey(id) {
        case .absent:
            throw Self.absent(id)
        case .sealed(let sealed):
            _ = try unseal(sealed, of: account, passphrase: passphrase)
            return false
        case .clear(let key):
            let authority: AccountAuthority
            do {
                authority = try AccountAuthority(account: account, privateKey: key)
            } catch {
                throw IdentityError(code: .damagedAccount, message: "the clear CA key in \(accountDirectory(id).path) is not the account CA certificate's")
            }
            try files.writeCAKey(try authority.privateKey.sealed(passphrase: passphrase, scrypt: scrypt), of: id, scrubbingReplaced: true)
            logger.info("encrypted the CA key under the account passphrase", metadata: ["account": "\(id.short)", "scrypt": "\(scrypt)"])
            return true
        }
    }

    /// This device's identity in account `id`.
    package func loadIdentity(_ id: AccountID) throws -> DeviceIdentity {
        let account = try loadAccount(id)
        let key = try Ed25519PrivateKey(pemRepresentation: files.readText("device.key", of: id))
        let certificate = try Certificate(pemEncoded: files.readText("device.pem", of: id))
        let identity = try DeviceIdentity(account: account, privateKey: key, certificate: certificate)
        try account.trust.validateDevice(certificate)
        return identity
    }

    /// This device's identity in the current account, or nil when signed out.
    package func loadCurrentIdentity() throws -> DeviceIdentity? {
        guard let id = try currentAccountID() else { return nil }
        return try loadIdentity(id)
    }

    // MARK: Join bundles

    /// The join bundle of account `id`: its CA certificate and its CA key exactly as this
    /// device stores it, sealed under the account passphrase.
    ///
    /// Needs no passphrase and runs no key derivation: re-sealing under the same passphrase
    /// would only change the salt, and under another would leave the joiner's CA key under a
    /// passphrase that is not the account's. A leaked bundle is therefore worth what this
    /// device's `ca.key` is: the account passphrase must still be guessed.
    ///
    /// - Throws: ``IdentityError/Code/caKeyInClear`` when the key is stored unencrypted
    ///   (``protectAuthority(_:passphrase:)`` first), ``IdentityError/Code/caKeyAbsent`` when
    ///   this device holds none.
    package func exportJoinBundle(_ id: AccountID) throws -> Data {
        let account = try loadAccount(id)
        switch try files.storedCAKey(id) {
        case .sealed(let sealed): return JoinBundle.make(certificate: account.caCertificate, sealedKey: sealed)
        case .clear: throw Self.inClear(id)
        case .absent: throw Self.absent(id)
        }
    }

    /// Joins the account in `bundle`: opens it with `passphrase` (the account passphrase,
    /// or for a bundle made before, the bundle's own), stores its CA certificate and its
    /// sealed CA key, makes this device's key and certificate for it, and signs in to it.
    ///
    /// The CA key is stored as the bundle seals it, so this device too can admit and remove
    /// devices with the same passphrase; a bundle sealed more cheaply than this store seals
    /// (scrypt N = 2^14, from an older Hearth) is sealed again under the same passphrase.
    /// Joining an account already stored keeps the existing device identity (and takes the
    /// bundle's CA key if this device had none, or only a clear one).
    ///
    /// - Throws: ``IdentityError/Code/wrongPassphrase``, ``IdentityError/Code/damagedBundle``
    ///   or ``IdentityError/Code/keyDerivationRefused``.
    @discardableResult
    package func importJoinBundle(_ bundle: Data, passphrase: String, deviceName: String = Self.defaultDeviceName) throws -> DeviceIdentity {
        let (authority, bundled) = try JoinBundle.openSealed(bundle, passphrase: passphrase)
        // Sealing again costs a derivation: only when the key is to be stored at all.
        let sealed = {
            bundled.parameters.isAtLeastAsCostly(as: scrypt) ? bundled : try authority.privateKey.sealed(passphrase: passphrase, scrypt: scrypt)
        }
        let id = authority.account.id
        if let existing = try? loadIdentity(id) {
            switch try? files.storedCAKey(id) {
            case .sealed?: break
            case .clear?: try files.writeCAKey(try sealed(), of: id, scrubbingReplaced: true)
            case .absent?, nil: try files.writeCAKey(try sealed(), of: id, scrubbingReplaced: false)
            }
            try signIn(id)
            return existing
        }
        let identity = try authority.makeDevice(named: deviceName)
        try files.save(account: authority.account, sealedKey: try sealed(), device: identity)
        try signIn(id)
        logger.info("joined account", metadata: ["account": "\(id.short)", "device": "\(identity.deviceID.short)"])
        return identity
    }

    /// The host name, the default name of this device in its certificate.
    package static var defaultDeviceName: String {
        let name = ProcessInfo.processInfo.hostName
        return name.isEmpty ? "device" : name
    }

    // MARK: The CA key

    private func unseal(_ sealed: EncryptedPrivateKeyInfo, of account: Account, passphrase: String) throws -> AccountAuthority {
        let key: Ed25519PrivateKey
        do {
            key = try Ed25519PrivateKey(sealed: sealed, passphrase: passphrase)
        } catch let error as IdentityError where error.code == .wrongPassphrase {
            throw IdentityError(code: .wrongPassphrase,
                                message: "the passphrase does not open the CA key of account \(account.id.short) (or the key is damaged)",
                                openSSLReasons: error.openSSLReasons)
        }
        do {
            return try AccountAuthority(account: account, privateKey: key)
        } catch {
            throw IdentityError(code: .damagedAccount, message: "the CA key in \(accountDirectory(account.id).path) is not the account CA certificate's")
        }
    }

    static func inClear(_ id: AccountID) -> IdentityError {
        IdentityError(code: .caKeyInClear, message: "the CA key of account \(id.short) is stored unencrypted; protect it with the account passphrase first")
    }

    static func absent(_ id: AccountID) -> IdentityError {
        IdentityError(code: .caKeyAbsent, message: "this device holds no CA key for account \(id.short)")
    }
}
