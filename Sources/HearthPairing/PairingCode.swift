import HearthCore
import HearthIdentity

/// The six-digit code two devices show while one of them joins the account (pairing): the
/// same on both screens when, and only when, both devices talk to each other directly.
///
/// It is derived from both devices' public keys as each saw them in the TLS handshake, and
/// from a fresh 32-byte nonce of each side:
///
/// ```text
/// digest = SHA-256("hearth-pair-code-v1" 00 · member key (32) · newcomer key (32) · member nonce (32) · newcomer nonce (32))
/// code   = (first 8 bytes of digest, as a big-endian integer) mod 1 000 000, six digits, shown "123 456"
/// ```
///
/// A relay in the middle has its own key on each side, so the two codes come from different
/// inputs. The nonces keep it from choosing keys until they match: the member commits to its
/// nonce (``commitment(memberKey:newcomerKey:memberNonce:)``) before it sees the newcomer's, and
/// reveals it only after, so neither side, nor a relay playing either side, can steer the code;
/// a relay's codes match by chance, one time in a million per attempt (docs/security.md,
/// "Pairing").
///
/// ```swift
/// let code = PairingCode(memberKey: member, newcomerKey: newcomer, memberNonce: a, newcomerNonce: b)
/// print(code)                                  // "236 738"
/// PairingCode(typed: "236738") == code         // true: what a person types is compared this way
/// ```
package struct PairingCode: Hashable, Sendable, CustomStringConvertible {
    /// The six digits, without a space.
    package let digits: String

    /// How many digits a code has.
    package static let length = 6
    /// Bytes of each side's nonce.
    package static let nonceLength = 32

    /// The code of a pairing between `memberKey` and `newcomerKey` (each as the other side saw it
    /// in the handshake) with these nonces.
    package init(memberKey: Ed25519PublicKey, newcomerKey: Ed25519PublicKey, memberNonce: [UInt8], newcomerNonce: [UInt8]) {
        self.init(memberKey: memberKey.rawRepresentation, newcomerKey: newcomerKey.rawRepresentation,
                  memberNonce: memberNonce, newcomerNonce: newcomerNonce)
    }

    /// The same from raw 32-byte keys (test vectors, docs/protocol.md).
    package init(memberKey: [UInt8], newcomerKey: [UInt8], memberNonce: [UInt8], newcomerNonce: [UInt8]) {
        let digest = SHA256.hash(Array("hearth-pair-code-v1".utf8) + [0] + memberKey + newcomerKey + memberNonce + newcomerNonce)
        let value = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 1_000_000
        let text = String(value)
        digits = String(repeating: "0", count: Self.length - text.count) + text
    }

    /// What a person typed, if it is a code: six digits, spaces and dashes ignored.
    package init?(typed text: String) {
        let kept = text.filter { $0 != " " && $0 != "-" && $0 != "\t" }
        guard kept.count == Self.length, kept.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        digits = kept
    }

    /// "123 456": two groups of three, easy to read out and compare.
    package var description: String { "\(digits.prefix(3)) \(digits.suffix(3))" }

    /// The member's commitment to its nonce, sent before it learns the newcomer's:
    /// SHA-256("hearth-pair-commit-v1" 00 · member key · newcomer key · member nonce).
    package static func commitment(memberKey: [UInt8], newcomerKey: [UInt8], memberNonce: [UInt8]) -> [UInt8] {
        SHA256.hash(Array("hearth-pair-commit-v1".utf8) + [0] + memberKey + newcomerKey + memberNonce)
    }

    /// The short hash of a newcomer's key in its mDNS announcement (TXT `k`): 16 hex digits of
    /// SHA-256("hearth-mdns-pair-v1" 00 · raw public key). A hint for a member to check that it
    /// reached the device it found, never a security decision.
    package static func announcementHash(of key: Ed25519PublicKey) -> String {
        String(Hex.encode(SHA256.hash(Array("hearth-mdns-pair-v1".utf8) + [0] + key.rawRepresentation)).prefix(16))
    }

    /// A fresh nonce from the system CSPRNG (`SystemRandomNumberGenerator`: getrandom(2)).
    static func nonce() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<nonceLength).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}
