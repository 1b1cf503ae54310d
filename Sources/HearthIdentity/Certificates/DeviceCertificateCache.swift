import Foundation
import HearthCore
import Synchronization

/// The device certificates of one account that this replica has verified, by device ID.
///
/// Deltas carry the DER certificates of the devices that signed their entries (see
/// docs/protocol.md, "Certificates with deltas"); the receiver admits each one here,
/// which checks it against the account CA, before verifying any entry it signed. A
/// certificate that fails is never cached, so a relayed forgery costs one check and
/// is then refused again.
public final class DeviceCertificateCache: Sendable {
    public let trust: AccountTrust
    private let certificates = Mutex<[DeviceID: Certificate]>([:])

    public init(trust: AccountTrust) {
        self.trust = trust
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
        let device = try trust.validateDevice(certificate, at: date)
        certificates.withLock { $0[device] = certificate }
        return device
    }

    /// The admitted certificate of `device`, if any.
    public func certificate(for device: DeviceID) -> Certificate? {
        certificates.withLock { $0[device] }
    }

    /// Every admitted certificate (to attach to deltas for peers that may lack them).
    public var all: [DeviceID: Certificate] {
        certificates.withLock { $0 }
    }

    /// Verifies `entry` with the admitted certificate of the device its signature names.
    ///
    /// - Throws: ``IdentityError/Code/unknownSigner`` when that device's certificate was
    ///   never admitted, or any error of ``AccountTrust/verify(entry:storeIdentifier:certificate:at:)``.
    public func verify(entry: Entry, storeIdentifier: String, at date: Date = Date()) throws {
        guard let signature = entry.signature else {
            throw IdentityError(code: .badSignature, message: "entry \(entry.key) is unsigned")
        }
        guard let device = DeviceID(bytes: signature.signer), let certificate = certificate(for: device) else {
            throw IdentityError(code: .unknownSigner, message: "no certificate for the signer of entry \(entry.key)")
        }
        try trust.verify(entry: entry, storeIdentifier: storeIdentifier, certificate: certificate, at: date)
    }
}
