import Foundation
import HearthCore

/// The SHA-256 of an Ed25519 public key, used to name accounts and devices.
///
/// A hash of the key, not a name, so an ID cannot be claimed without holding the key:
/// whoever shows a certificate for that key and signs with it is that account or device.
package struct KeyHash: Hashable, Comparable, Sendable {
    /// The 32 digest bytes.
    package let bytes: [UInt8]

    /// The hash of `publicKey`'s 32 raw bytes.
    package init(of publicKey: Ed25519PublicKey) {
        bytes = SHA256.hash(publicKey.rawRepresentation)
    }

    /// Wraps 32 digest bytes; nil for any other length.
    package init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 32 else { return nil }
        self.bytes = Array(bytes)
    }

    /// Parses 64 hexadecimal digits.
    package init?(hex: String) {
        guard let bytes = Hex.decode(hex) else { return nil }
        self.init(bytes: bytes)
    }

    package var hex: String { Hex.encode(bytes) }

    package var data: Data { Data(bytes) }

    /// The first 8 hex digits: enough to tell a household's devices apart in a log line,
    /// never used for a security decision.
    package var short: String { String(hex.prefix(8)) }

    /// The hash in base32 (RFC 4648, no padding), in groups of four separated by dashes:
    /// 52 characters a person can compare aloud, as other LAN tools show device IDs.
    package var fingerprint: String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var chars: [Character] = []
        var buffer: UInt32 = 0, bits = 0
        for byte in bytes {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= 5 {
                chars.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { chars.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        var groups: [String] = []
        var i = 0
        while i < chars.count {
            groups.append(String(chars[i..<min(i + 4, chars.count)]))
            i += 4
        }
        return groups.joined(separator: "-")
    }

    package static func < (a: KeyHash, b: KeyHash) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
}

/// Names an account (a household): the SHA-256 of its certificate authority's public key.
package struct AccountID: Hashable, Comparable, Sendable, CustomStringConvertible {
    package let hash: KeyHash
    package init(hash: KeyHash) { self.hash = hash }
    package init(caPublicKey: Ed25519PublicKey) { hash = KeyHash(of: caPublicKey) }
    package init?(hex: String) {
        guard let hash = KeyHash(hex: hex) else { return nil }
        self.hash = hash
    }
    package var hex: String { hash.hex }
    package var bytes: [UInt8] { hash.bytes }
    package var fingerprint: String { hash.fingerprint }
    package var short: String { hash.short }
    package var description: String { "account \(short)" }
    package static func < (a: AccountID, b: AccountID) -> Bool { a.hash < b.hash }

    /// The account's hash for mDNS TXT records (`a=`): 16 lowercase hex digits of
    /// SHA-256("hearth-mdns-account-v1" 00 · account ID). Domain-separated, so the
    /// advertisement is not a prefix of the ID that certificates carry.
    package var shortHash: String { MDNSHash.make("hearth-mdns-account-v1", bytes) }

    /// A store's hash for mDNS TXT records (`s=`): 16 lowercase hex digits of
    /// SHA-256("hearth-mdns-store-v1" 00 · account ID · store identifier). Keyed by the
    /// account ID, so that a listener cannot test guesses of common store identifiers
    /// ("com.example.notes") without knowing the account.
    package func storeHash(storeIdentifier: String) -> String {
        MDNSHash.make("hearth-mdns-store-v1", bytes + Array(storeIdentifier.utf8))
    }
}

/// Names a device within an account: the SHA-256 of its device public key. This is the
/// `signer` of an `EntrySignature` and what TLS reports as the peer.
package struct DeviceID: Hashable, Comparable, Sendable, CustomStringConvertible {
    package let hash: KeyHash
    package init(hash: KeyHash) { self.hash = hash }
    package init(publicKey: Ed25519PublicKey) { hash = KeyHash(of: publicKey) }
    package init?(bytes: some Collection<UInt8>) {
        guard let hash = KeyHash(bytes: bytes) else { return nil }
        self.hash = hash
    }
    package init?(hex: String) {
        guard let hash = KeyHash(hex: hex) else { return nil }
        self.hash = hash
    }
    package var hex: String { hash.hex }
    package var bytes: [UInt8] { hash.bytes }
    /// The 32 bytes as `Data`, as stored in `EntrySignature.signer`.
    package var data: Data { hash.data }
    package var fingerprint: String { hash.fingerprint }
    package var short: String { hash.short }
    package var description: String { "device \(short)" }

    /// The device's hash for mDNS TXT records (`d=`): 16 lowercase hex digits of
    /// SHA-256("hearth-mdns-device-v1" 00 · device ID).
    package var shortHash: String { MDNSHash.make("hearth-mdns-device-v1", bytes) }
    package static func < (a: DeviceID, b: DeviceID) -> Bool { a.hash < b.hash }
}

/// Hashes for mDNS advertisements: short, domain-separated, never used for a security
/// decision (TLS decides who a peer is; a TXT record is only a hint).
enum MDNSHash {
    static let length = 16

    static func make(_ domain: String, _ bytes: [UInt8]) -> String {
        String(Hex.encode(SHA256.hash(Array(domain.utf8) + [0] + bytes)).prefix(length))
    }
}
