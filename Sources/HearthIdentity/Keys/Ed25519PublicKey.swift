import CHearthOpenSSL
import Foundation
import HearthCore

/// An Ed25519 public key, held as an OpenSSL `EVP_PKEY`.
///
/// Immutable once made; OpenSSL allows concurrent verification with one key as long as
/// each operation has its own `EVP_MD_CTX`, which is what this type does, hence Sendable.
package final class Ed25519PublicKey: @unchecked Sendable, Hashable, CustomStringConvertible {
    package let pointer: OpaquePointer

    /// Takes ownership of one reference to `pointer`.
    package init(taking pointer: OpaquePointer) throws {
        _ = OpenSSLRuntime.ready
        guard EVP_PKEY_get_id(pointer) == EVP_PKEY_ED25519 else {
            EVP_PKEY_free(pointer)
            throw IdentityError(code: .invalidKey, message: "not an Ed25519 key")
        }
        self.pointer = pointer
    }

    /// The key from its 32 raw bytes.
    package convenience init(rawRepresentation: some Collection<UInt8>) throws {
        _ = OpenSSLRuntime.ready
        let raw = Array(rawRepresentation)
        guard raw.count == 32 else { throw IdentityError(code: .invalidKey, message: "an Ed25519 public key is 32 bytes, not \(raw.count)") }
        guard let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, raw, raw.count) else {
            throw IdentityError.invalidKey("EVP_PKEY_new_raw_public_key")
        }
        try self.init(taking: key)
    }

    deinit { EVP_PKEY_free(pointer) }

    /// The 32 raw bytes.
    package var rawRepresentation: [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 32)
        var length = 32
        let ok = EVP_PKEY_get_raw_public_key(pointer, &bytes, &length)
        precondition(ok == 1 && length == 32, "EVP_PKEY_get_raw_public_key failed on an Ed25519 key")
        return bytes
    }

    /// Whether `signature` is this key's Ed25519 signature of `message`.
    package func isValidSignature(_ signature: some Collection<UInt8>, for message: some Collection<UInt8>) -> Bool {
        let signature = Array(signature), message = Array(message)
        guard signature.count == 64, let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        // Ed25519 hashes internally: no digest, one-shot EVP_DigestVerify.
        guard EVP_DigestVerifyInit(context, nil, nil, nil, pointer) == 1 else {
            OpenSSLErrorQueue.clear()
            return false
        }
        let ok = EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
        OpenSSLErrorQueue.clear()
        return ok
    }

    package static func == (a: Ed25519PublicKey, b: Ed25519PublicKey) -> Bool {
        a.rawRepresentation == b.rawRepresentation
    }

    package func hash(into hasher: inout Hasher) { hasher.combine(rawRepresentation) }

    package var description: String { "Ed25519PublicKey(\(Hex.encode(rawRepresentation)))" }
}
