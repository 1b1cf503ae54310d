import Foundation

extension AccountStore {
    /// Stores an account this device was admitted to by a member (pairing, `HearthPairing`):
    /// the account CA certificate, this device's key and the certificate the member issued for
    /// it, and the account's CA key as the member stores it, sealed under the account passphrase
    /// (or nothing, when the member kept it); then signs in to it.
    ///
    /// Everything is checked before anything is written: the CA certificate is a self-signed
    /// Ed25519 CA, the device certificate is for `deviceKey` and chains to that CA now, and the
    /// sealed key parses within the bounds every reader applies (``ScryptParameters/maximum``).
    /// That the sealed key is the CA's cannot be checked without the passphrase, and is not:
    /// `hearth device approve` on this device later says so if it is not. Nothing here runs a
    /// key derivation.
    ///
    /// Pairing into an account already stored here keeps this device's existing identity if it
    /// is still valid (as ``importJoinBundle(_:passphrase:deviceName:)`` does), taking the
    /// sealed key if this device had none or only a clear one; an identity whose certificate
    /// expired is replaced by the new one.
    ///
    /// ```swift
    /// let identity = try accounts.importPairing(caCertificate: ca, deviceKey: key,
    ///                                           deviceCertificate: granted, sealedCAKey: pem)
    /// print("joined", identity.account.displayName, "as", identity.deviceName)
    /// ```
    ///
    /// - Throws: ``IdentityError/Code/invalidCertificate`` (not a CA),
    ///   ``IdentityError/Code/invalidKey`` (the certificate is for another key),
    ///   ``IdentityError/Code/certificateRejected`` (not issued by that CA, or expired),
    ///   ``IdentityError/Code/damagedBundle`` (the sealed key does not parse),
    ///   ``IdentityError/Code/keyDerivationRefused`` (it asks for a KDF Hearth does not read).
    @discardableResult
    package func importPairing(caCertificate: Certificate, deviceKey: Ed25519PrivateKey,
                              deviceCertificate: Certificate, sealedCAKey: String?) throws -> DeviceIdentity {
        let account = try Account(caCertificate: caCertificate)
        let identity = try DeviceIdentity(account: account, privateKey: deviceKey, certificate: deviceCertificate)
        try account.trust.validateDevice(deviceCertificate)
        var sealed: EncryptedPrivateKeyInfo?
        if let sealedCAKey {
            do {
                sealed = try EncryptedPrivateKeyInfo(pem: sealedCAKey)
            } catch where error.code == .keyDerivationRefused {
                throw error
            } catch {
                throw IdentityError(code: .damagedBundle, message: "the account key sent with the grant does not parse: \(error.message)")
            }
        }
        let id = account.id
        if let existing = try? loadIdentity(id) {
            if let sealed {
                switch try? files.storedCAKey(id) {
                case .sealed?: break
                case .clear?: try files.writeCAKey(sealed, of: id, scrubbingReplaced: true)
                case .absent?, nil: try files.writeCAKey(sealed, of: id, scrubbingReplaced: false)
                }
            }
            try signIn(id)
            return existing
        }
        let keep: EncryptedPrivateKeyInfo?
        switch try? files.storedCAKey(id) {
        case .sealed?: keep = nil           // this device's own copy, from before
        default: keep = sealed
        }
        try files.save(account: account, sealedKey: keep, device: identity)
        try signIn(id)
        return identity
    }

    /// The CA key of account `id` as this device stores it, sealed under the account
    /// passphrase (what a member sends with a pairing grant, and a join bundle carries).
    ///
    /// - Throws: ``IdentityError/Code/caKeyInClear``, ``IdentityError/Code/caKeyAbsent``.
    package func sealedCAKey(_ id: AccountID) throws -> EncryptedPrivateKeyInfo {
        _ = try loadAccount(id)
        switch try files.storedCAKey(id) {
        case .sealed(let sealed): return sealed
        case .clear: throw Self.inClear(id)
        case .absent: throw Self.absent(id)
        }
    }
}
