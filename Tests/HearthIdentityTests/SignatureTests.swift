import Foundation
import HearthCore
import HearthIdentity
import Testing

/// The test vectors of docs/protocol.md, "Canonical encoding and signatures". The
/// expected signature was also produced independently with
/// `openssl pkeyutl -sign -rawin` over the same bytes.
@Suite("Entry and vector signatures")
struct SignatureTests {
    /// Private key (RFC 8032 seed) 01 02 … 20.
    static let seed: [UInt8] = Array(1...32)
    static let storeIdentifier = "com.example.notes"
    static let origin = ReplicaID(high: 0x0011_2233_4455_6677, low: 0x8899_aabb_ccdd_eeff)
    static let entry = Entry(
        key: "backgroundColor",
        value: .string("blue"),
        timestamp: HLCTimestamp(milliseconds: 1_700_000_000_000, counter: 1),
        origin: origin,
        sequence: 42
    )

    static let expectedPublicKey = "79b5562e8fe654f94078b112e8a98ba7901f853ae695bed7e0e3910bad049664"
    static let expectedDeviceID = "65b60673d6ed884bf01c2c222d82ada0740f29ac3355d6a925c81f17f47a27b8"
    static let expectedFingerprint = "MW3A-M46W-5WEE-X4A4-FQRC-3AVN-UB2A-6KNM-GNK5-NKJF-ZAPR-P5D2-E64A"
    static let expectedSigningBytes = [
        "6865617274682d656e7472792d763100",  // "hearth-entry-v1" 00
        "00000011", "636f6d2e6578616d706c652e6e6f746573",  // store identifier
        "0000000f", "6261636b67726f756e64436f6c6f72",  // key
        "01", "0100000004626c7565",  // present, string "blue"
        "018bcfe568000001",  // timestamp: 1700000000000 ms << 16 | 1
        "00112233445566778899aabbccddeeff",  // origin
        "000000000000002a",  // sequence 42
    ].joined()
    static let expectedSignature =
        "f0fde83ae631c4d886a0cf106acf6bcaedcdfb0b7a5b4e7a12a7ad2d67a29c64"
        + "0f6b246cde93d8695b60135197a804008739af1afd74455f1721799a09d80c06"

    static let vector = VersionVector([origin: 42, ReplicaID(high: 1, low: 2): 7])
    static let expectedVectorSigningBytes = [
        "6865617274682d766563746f722d763100",  // "hearth-vector-v1" 00
        "00000002",
        "00000000000000010000000000000002", "0000000000000007",
        "00112233445566778899aabbccddeeff", "000000000000002a",
    ].joined()

    static func fixedKey() throws -> Ed25519PrivateKey {
        try Ed25519PrivateKey(rawRepresentation: seed)
    }

    /// An account whose device uses the fixed key, so that whole-chain verification runs
    /// on the vector's signature.
    static func fixedIdentity() throws -> DeviceIdentity {
        let authority = try AccountAuthority.create(displayName: "Vector household")
        let key = try fixedKey()
        let certificate = try authority.issueDeviceCertificate(for: key.publicKey, deviceName: "vector")
        return try DeviceIdentity(account: authority.account, privateKey: key, certificate: certificate)
    }

    @Test("The fixed key gives RFC 8032's public key, and its device ID and fingerprint")
    func publicKey() throws {
        let key = try Self.fixedKey()
        #expect(Hex.encode(key.publicKey.rawRepresentation) == Self.expectedPublicKey)
        let device = DeviceID(publicKey: key.publicKey)
        #expect(device.hex == Self.expectedDeviceID)
        #expect(device.fingerprint == Self.expectedFingerprint)
    }

    @Test("Entry signing bytes and signature match the documented vector")
    func entryVector() throws {
        let bytes = Self.entry.signingBytes(storeIdentifier: Self.storeIdentifier)
        #expect(Hex.encode(bytes) == Self.expectedSigningBytes)
        let identity = try Self.fixedIdentity()
        let signature = try identity.sign(entry: Self.entry, storeIdentifier: Self.storeIdentifier)
        #expect(Hex.encode(signature.bytes) == Self.expectedSignature)
        #expect(Hex.encode(signature.signer) == Self.expectedDeviceID)
        var signed = Self.entry
        signed.signature = signature
        try Self.verifier(identity).verify(entry: signed, storeIdentifier: Self.storeIdentifier)
    }

    /// The production path: the certificate admitted once, then entries verified against it.
    static func verifier(_ identity: DeviceIdentity) throws -> DeviceCertificateCache {
        let cache = DeviceCertificateCache(trust: identity.account.trust)
        try cache.admit(identity.certificate)
        return cache
    }

    @Test("Version-vector canonical bytes match the documented vector (hello digests hash them)")
    func vectorVector() throws {
        #expect(Hex.encode(Self.vector.signingBytes) == Self.expectedVectorSigningBytes)
        var other = Self.vector
        other.advance(origin: Self.origin, to: 43)
        #expect(other.signingBytes != Self.vector.signingBytes)
    }

    /// Flips one bit of the field `field` of a signed entry.
    static func flipped(_ entry: Entry, _ field: String) -> Entry {
        var e = entry
        switch field {
        case "key":
            var utf8 = Array(e.key.utf8)
            utf8[0] ^= 0x01
            e.key = StoreKey(String(decoding: utf8, as: UTF8.self))
        case "value":
            e.value = .string("blud")  // 'e' 0x65 → 'd' 0x64
        case "tombstone":
            e.value = nil
        case "timestamp":
            e.timestamp = HLCTimestamp(rawValue: e.timestamp.rawValue ^ 1)
        case "origin":
            e.origin = ReplicaID(high: e.origin.high, low: e.origin.low ^ 1)
        case "sequence":
            e.sequence ^= 1
        case "signature":
            var bytes = e.signature!.bytes
            bytes[0] ^= 0x80
            e.signature!.bytes = bytes
        case "signer":
            var signer = e.signature!.signer
            signer[31] ^= 0x01
            e.signature!.signer = signer
        default:
            fatalError(field)
        }
        return e
    }

    @Test("A flipped bit fails verification",
          arguments: ["key", "value", "tombstone", "timestamp", "origin", "sequence", "signature", "signer"])
    func bitFlip(_ field: String) throws {
        let identity = try Self.fixedIdentity()
        let signed = try identity.signed(Self.entry, storeIdentifier: Self.storeIdentifier)
        let verifier = try Self.verifier(identity)
        try verifier.verify(entry: signed, storeIdentifier: Self.storeIdentifier)
        let tampered = Self.flipped(signed, field)
        #expect(tampered != signed)
        #expect(throws: IdentityError.self) {
            try verifier.verify(entry: tampered, storeIdentifier: Self.storeIdentifier)
        }
    }

    @Test("An entry signed for one store does not verify for another")
    func otherStore() throws {
        let identity = try Self.fixedIdentity()
        let signed = try identity.signed(Self.entry, storeIdentifier: Self.storeIdentifier)
        #expect(throws: IdentityError.self) {
            try Self.verifier(identity).verify(entry: signed, storeIdentifier: "com.example.notez")
        }
    }

    @Test("A flipped bit in the key gives a different signature: Ed25519 depends on every key bit")
    func flippedKey() throws {
        var seed = Self.seed
        seed[0] ^= 0x01
        let other = try Ed25519PrivateKey(rawRepresentation: seed)
        let bytes = Self.entry.signingBytes(storeIdentifier: Self.storeIdentifier)
        let signature = try other.signature(for: bytes)
        #expect(Hex.encode(signature) != Self.expectedSignature)
        #expect(!(try Self.fixedKey().publicKey.isValidSignature(signature, for: bytes)))
    }

    @Test("Signatures by another account's device, or an unsigned entry, are refused")
    func wrongSigner() throws {
        let identity = try Self.fixedIdentity()
        let stranger = try AccountAuthority.create(displayName: "Strangers").makeDevice(named: "intruder")
        let forged = try stranger.signed(Self.entry, storeIdentifier: Self.storeIdentifier)
        let verifier = try Self.verifier(identity)
        // The stranger's certificate does not chain to this account's CA.
        let error = #expect(throws: IdentityError.self) { try verifier.admit(stranger.certificate) }
        #expect(error?.code == .certificateRejected)
        // The stranger's signature, with only the genuine device's certificate admitted.
        let mismatch = #expect(throws: IdentityError.self) {
            try verifier.verify(entry: forged, storeIdentifier: Self.storeIdentifier)
        }
        #expect(mismatch?.code == .unknownSigner)
        // The stranger's signature claiming to be the genuine device.
        var impostor = forged
        impostor.signature?.signer = identity.deviceID.data
        let impersonated = #expect(throws: IdentityError.self) {
            try verifier.verify(entry: impostor, storeIdentifier: Self.storeIdentifier)
        }
        #expect(impersonated?.code == .badSignature)
        let unsigned = #expect(throws: IdentityError.self) {
            try verifier.verify(entry: Self.entry, storeIdentifier: Self.storeIdentifier)
        }
        #expect(unsigned?.code == .badSignature)
    }

    @Test("The certificate cache admits only the account's devices and verifies relayed entries")
    func certificateCache() throws {
        let identity = try Self.fixedIdentity()
        let cache = DeviceCertificateCache(trust: identity.account.trust)
        let signed = try identity.signed(Self.entry, storeIdentifier: Self.storeIdentifier)
        let unknown = #expect(throws: IdentityError.self) { try cache.verify(entry: signed, storeIdentifier: Self.storeIdentifier) }
        #expect(unknown?.code == .unknownSigner)
        let admitted = try cache.admit(derEncoded: identity.certificate.derEncoded)
        #expect(admitted == identity.deviceID)
        try cache.verify(entry: signed, storeIdentifier: Self.storeIdentifier)
        let stranger = try AccountAuthority.create(displayName: "Strangers").makeDevice(named: "intruder")
        #expect(throws: IdentityError.self) { try cache.admit(derEncoded: stranger.certificate.derEncoded) }
        #expect(cache.certificate(for: stranger.deviceID) == nil)
        #expect(throws: IdentityError.self) { try cache.admit(derEncoded: [0x30, 0x03, 0x02, 0x01]) }
    }
}
