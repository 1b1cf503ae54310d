import Foundation
import HearthCore

/// The device certificates of one account that this replica has verified, by device ID.
///
/// Deltas carry the DER certificates of the devices that signed their entries (see
/// docs/protocol.md, "Certificates with deltas"); the receiver admits each one here,
/// which checks it against the account CA, before verifying any entry it signed. A
/// certificate that fails is never cached, so a relayed forgery costs one check and
/// is then refused again.
package final class DeviceCertificateCache: Sendable {
    package let trust: AccountTrust
    /// Devices removed from the account: their entries stamped after the removal are refused.
    package let removals: DeviceRemovals?
    /// Admitted certificates with their public keys, parsed once.
    /// How entries are verified (``EntrySignatures``).
    package let signatures: EntrySignatures.Scheme
    private let certificates = Locked<[DeviceID: (certificate: Certificate, key: Ed25519PublicKey)]>([:])

    /// `signatures`: how the entries are verified, Ed25519 but in the simulator (the engine's
    /// identity's, ``DeviceIdentity/signatures``).
    package init(trust: AccountTrust, removals: DeviceRemovals? = nil, signatures: EntrySignatures.Scheme = .ed25519) {
        self.trust = trust
        self.removals = removals
        self.signatures = signatures
    }

    /// Verifies `derEncoded` against the account CA and remembers it.
    @discardableResult
    package func admit(derEncoded: some Collection<UInt8>) throws -> DeviceID {
        try admit(try Certificate(derEncoded: derEncoded))
    }

    /// Verifies that the account CA issued `certificate` (its chain, checked as of the start of
    /// its validity: an expired certificate still vouches for what its device signed while it was
    /// valid) and remembers it, unless a certificate of the same device lasting longer is known
    /// (a renewal is not undone by an older certificate that comes later).
    @discardableResult
    package func admit(_ certificate: Certificate) throws -> DeviceID {
        // The same certificate again (every delta carries its signers'): nothing to redo.
        if let key = certificate.publicKey, let known = certificates.withLock({ $0[DeviceID(publicKey: key)] }),
           known.certificate == certificate {
            return DeviceID(publicKey: key)
        }
        let device = try trust.validateIssued(certificate)
        guard let key = certificate.publicKey else { throw IdentityError.certificateRejected("the device key is not Ed25519") }
        certificates.withLock { table in
            if let known = table[device], known.certificate.notValidAfter >= certificate.notValidAfter { return }
            table[device] = (certificate, key)
        }
        return device
    }

    /// The admitted certificate of `device`, if any.
    package func certificate(for device: DeviceID) -> Certificate? {
        certificates.withLock { $0[device]?.certificate }
    }

    /// Every admitted certificate (to attach to deltas for peers that may lack them).
    package var all: [DeviceID: Certificate] {
        certificates.withLock { $0.mapValues(\.certificate) }
    }

    /// Verifies `entry` with the admitted certificate of the device its signature names.
    ///
    /// - Throws: ``IdentityError/Code/unknownSigner`` when that device's certificate was
    ///   never admitted, ``IdentityError/Code/removedSigner`` when the device was removed before
    ///   the entry's timestamp, or any error of ``AccountTrust/verify(entry:storeIdentifier:certificate:at:)``.
    package func verify(entry: Entry, storeIdentifier: String) throws {
        guard let signature = entry.signature else {
            throw IdentityError(code: .badSignature, message: "entry \(entry.key) is unsigned")
        }
        guard let device = DeviceID(bytes: signature.signer), let admitted = certificates.withLock({ $0[device] }) else {
            throw IdentityError(code: .unknownSigner, message: "no certificate for the signer of entry \(entry.key)")
        }
        // The chain was checked at admission. An entry stamped after the device's latest
        // certificate expired is refused; what it signed before stays valid for good (a device
        // that stopped renewing, or was removed, keeps its earlier writes). A device whose
        // certificate expired cannot connect to anyone, so it cannot spread new entries itself.
        guard entry.timestamp.date <= admitted.certificate.notValidAfter else {
            throw IdentityError.certificateRejected("entry \(entry.key) is stamped \(entry.timestamp.date), after the certificate of \(device) expired (\(admitted.certificate.notValidAfter))")
        }
        let message = entry.signingBytes(storeIdentifier: storeIdentifier)
        // The simulator's stand-in for its unsampled seeds (EntrySignatures); Ed25519 everywhere else.
        let valid = signatures == .ed25519 ? admitted.key.isValidSignature(signature.bytes, for: message)
            : Array(signature.bytes) == EntrySignatures.simulated(message, by: device.data)
        guard valid else {
            throw IdentityError.badSignature("entry \(entry.key): the signature of \(device) does not verify")
        }
        // What it wrote before its removal stays; what it stamps after is refused.
        if let removal = removals?.removal(of: device), entry.timestamp.milliseconds > removal.removedAt {
            throw IdentityError(code: .removedSigner, message: "entry \(entry.key): signed by \(device), removed from the account at \(removal.date), and stamped \(entry.timestamp.date)")
        }
    }
}
