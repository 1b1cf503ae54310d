import Foundation
import HearthCore

/// How a device signs and verifies entries: Ed25519 always, but in the household simulator
/// (hearth-sim, docs/simulator.md, "Signatures"), which may choose a fast stand-in for the seeds
/// it does not sample for real signatures.
///
/// Chosen per device, not per process: the identity carries its scheme
/// (``DeviceIdentity/signatures``), signs with it, and the sync engine's certificate cache
/// verifies with the identity's (``DeviceCertificateCache/init(trust:removals:signatures:)``), so
/// devices of one process may differ and nothing process-wide is left to set or forget.
/// Behind the same interface (``DeviceIdentity/sign(entry:storeIdentifier:)`` and
/// ``DeviceCertificateCache/verify(entry:storeIdentifier:)``), so the engine, the encoding and
/// the checks run as they do in production. The stand-in keeps what sync depends on: a
/// 64-byte signature bound to the signer's device ID and to every signed byte of the entry
/// (its store, key, value, stamp, origin and sequence), so an entry changed on the way, or
/// named with another signer, fails as `badSignature`; an unknown or removed signer is refused
/// as before (those checks come before and after the signature's). What it skips is the
/// cryptography: anyone who knows a device ID could forge one, and it costs a SHA-256 instead
/// of an Ed25519 signature (about 50 µs) or verification (about 130 µs).
package enum EntrySignatures {
    package enum Scheme: Sendable, Equatable {
        /// Ed25519 with the device's key: the only scheme outside the simulator.
        case ed25519
        /// SHA-256 of the device ID and the signed bytes, twice over (64 bytes): the simulator's.
        case simulated
    }

    /// The simulated signature of `message` by `device`.
    static func simulated(_ message: [UInt8], by device: Data) -> [UInt8] {
        let digest = SHA256.hash(Array("hearth-simulated-signature".utf8) + Array(device) + message)
        return digest + digest
    }
}
