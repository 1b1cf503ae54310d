import Foundation
import HearthCore

/// The device certificates of one account that this replica has verified, by device ID.
///
/// Deltas carry the DER certificates of the devices that signed their entries (see
/// docs/protocol.md, "Certificates with deltas"); the receiver admits each one here,
/// which checks it against the account CA, before verifying any entry it signed. A
/// certificate that fails is never cached, so a relayed forgery costs one check and
/// is then refused again.
public final class DeviceCertificateCache: Sendable {
    public let trust: AccountTrust
    /// Devices removed from the account: their entries stamped after the removal are refused.
    public let removals: DeviceRemovals?
    /// Admitted certificates with their public keys, parsed once.
    private let certificates = Locked<[DeviceID: (certificate: Certificate, key: Ed25519PublicKey)]>([:])

    public init(trust: AccountTrust, removals: DeviceRemovals? = nil) {
        self.trust = trust
        self.removals = removals
    }

    /// Verifies `derEncoded` against the account CA and remembers it.
    @discardableResult
    public func admit(derEncoded: some Collection<UInt8>, at date: Date = Date()) throws -> DeviceID {
        let certificate = try Certificate(derEncoded: derEncoded)
        return try admit(certificate, at: date)
    }

    /// Verifies `certificate` against the account CA and remembers it.
    @discardableResult
    public func admit(_ certificate: Certificate, at date: Date = Date()) throws -> DeviceID {
        // The same certificate again (every delta carries its signers'): nothing to redo.
        if let key = certificate.publicKey, let known = certificates.withLock({ $0[DeviceID(publicKey: key)] }),
           known.certificate == certificate, known.certificate.notValidBefore <= date, date <= known.certificate.notValidAfter {
            return DeviceID(publicKey: key)
        }
        let device = try trust.validateDevice(certificate, at: date)
        guard let key = certificate.publicKey else { throw IdentityError.certificateRejected("the device key is not Ed25519") }
        certificates.withLock { $0[device] = (certificate, key) }
        return device
    }

    /// The admitted certificate of `device`, if any.
    public func certificate(for device: DeviceID) -> Certificate? {
        certificates.withLock { $0[device]?.certificate }
    }

    /// Every admitted certificate (to attach to deltas for peers that may lack them).
    public var all: [DeviceID: Certificate] {
        certificates.withLock { $0.mapValues(\.certificate) }
    }

    /// Verifies `entry` with the admitted certificate of the device its signature names.
    ///
    /// - Throws: ``IdentityError/Code/unknownSigner`` when that device's certificate was
    ///   never admitted, ``IdentityError/Code/removedSigner`` when the device was removed before
    ///   the entry's timestamp, or any error of ``AccountTrust/verify(entry:storeIdentifier:certificate:at:)``.
    public func verify(entry: Entry, storeIdentifier: String, at date: Date = Date()) throws {
        guard let signature = entry.signature else {
            throw IdentityError(code: .badSignature, message: "entry \(entry.key) is unsigned")
        }
        guard let device = DeviceID(bytes: signature.signer), let admitted = certificates.withLock({ $0[device] }) else {
            throw IdentityError(code: .unknownSigner, message: "no certificate for the signer of entry \(entry.key)")
        }
        // The chain was checked at admission; what can change since is the time.
        guard admitted.certificate.notValidBefore <= date, date <= admitted.certificate.notValidAfter else {
            throw IdentityError.certificateRejected("the certificate of \(device) is not valid at \(date)")
        }
        guard admitted.key.isValidSignature(signature.bytes, for: entry.signingBytes(storeIdentifier: storeIdentifier)) else {
            throw IdentityError.badSignature("entry \(entry.key): the signature of \(device) does not verify")
        }
        // What it wrote before its removal stays; what it stamps after is refused.
        if let removal = removals?.removal(of: device), entry.timestamp.milliseconds > removal.removedAt {
            throw IdentityError(code: .removedSigner, message: "entry \(entry.key): signed by \(device), removed from the account at \(removal.date), and stamped \(entry.timestamp.date)")
        }
    }
}
