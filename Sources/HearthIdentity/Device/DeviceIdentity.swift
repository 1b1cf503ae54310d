import Foundation
import HearthCore

/// This device's identity within one account: its Ed25519 key, its certificate signed
/// by the account CA, and the account it belongs to.
///
/// What the sync engine signs with and what the TLS layer presents to peers.
package struct DeviceIdentity: Sendable, CustomStringConvertible {
    package let account: Account
    package let privateKey: Ed25519PrivateKey
    package let certificate: Certificate
    /// SHA-256 of the device's public key.
    package let deviceID: DeviceID
    /// How this device signs its entries, and how the engine it runs verifies its peers':
    /// Ed25519, but for the simulator's fast stand-in (``EntrySignatures``).
    package let signatures: EntrySignatures.Scheme

    /// Pairs a key with its certificate.
    ///
    /// Does not check that the certificate chains to the account CA (peers do that, and
    /// tests need identities that peers refuse); it does check that the key is the
    /// certificate's.
    package init(account: Account, privateKey: Ed25519PrivateKey, certificate: Certificate,
                 signatures: EntrySignatures.Scheme = .ed25519) throws {
        let publicKey = privateKey.publicKey
        guard certificate.publicKey == publicKey else {
            throw IdentityError(code: .invalidKey, message: "the device key does not match its certificate")
        }
        self.account = account
        self.privateKey = privateKey
        self.certificate = certificate
        deviceID = DeviceID(publicKey: publicKey)
        self.signatures = signatures
    }

    /// The device's name, from its certificate.
    package var deviceName: String { certificate.commonName ?? "" }

    package var description: String { "\(deviceName) (\(deviceID.short)) in \(account)" }

    // MARK: Signatures

    /// Signs `entry` as it would be stored in `storeIdentifier`.
    package func sign(entry: Entry, storeIdentifier: String) throws -> EntrySignature {
        let message = entry.signingBytes(storeIdentifier: storeIdentifier)
        let bytes = signatures == .ed25519 ? try privateKey.signature(for: message)
            : EntrySignatures.simulated(message, by: deviceID.data)
        return EntrySignature(signer: deviceID.data, bytes: Data(bytes))
    }

    /// `entry` with its signature set.
    package func signed(_ entry: Entry, storeIdentifier: String) throws -> Entry {
        var copy = entry
        copy.signature = try sign(entry: entry, storeIdentifier: storeIdentifier)
        return copy
    }
}
