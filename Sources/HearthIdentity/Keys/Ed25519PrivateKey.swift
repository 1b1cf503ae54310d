import CHearthOpenSSL
import Foundation

/// An Ed25519 private key, held as an OpenSSL `EVP_PKEY`.
///
/// Immutable once made; each signature uses its own `EVP_MD_CTX`, so one key may sign
/// from several threads, hence Sendable.
package final class Ed25519PrivateKey: @unchecked Sendable {
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

    /// A new random key from OpenSSL's CSPRNG.
    package convenience init() throws {
        _ = OpenSSLRuntime.ready
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nil) else {
            throw IdentityError.openSSL("EVP_PKEY_CTX_new_id(ED25519)")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_keygen(context, &key) == 1, let key else {
            throw IdentityError.openSSL("Ed25519 key generation")
        }
        try self.init(taking: key)
    }

    /// The key from its 32-byte seed (RFC 8032's private key). For test vectors and
    /// interoperability; keys for use are made by ``init()``.
    package convenience init(rawRepresentation: some Collection<UInt8>) throws {
        _ = OpenSSLRuntime.ready
        let raw = Array(rawRepresentation)
        guard raw.count == 32 else { throw IdentityError(code: .invalidKey, message: "an Ed25519 private key is 32 bytes, not \(raw.count)") }
        guard let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, raw, raw.count) else {
            throw IdentityError.invalidKey("EVP_PKEY_new_raw_private_key")
        }
        try self.init(taking: key)
    }

    /// Reads an unencrypted PKCS#8 PEM ("PRIVATE KEY").
    package convenience init(pemRepresentation: String) throws {
        _ = OpenSSLRuntime.ready
        let key = MemoryBIO.read(Array(pemRepresentation.utf8)) { bio in
            // A passphrase callback with no passphrase: an encrypted key fails instead of
            // OpenSSL prompting on the terminal.
            PEM_read_bio_PrivateKey(bio, nil, hearth_pem_passphrase_callback_pointer(), nil)
        }
        guard let key = key ?? nil else { throw IdentityError.invalidKey("reading a PKCS#8 private key") }
        try self.init(taking: key)
    }

    /// Reads an encrypted PKCS#8 PEM ("ENCRYPTED PRIVATE KEY"), as written by
    /// ``encryptedPEMRepresentation(passphrase:)``: PBES2 with scrypt and AES-256-CBC.
    ///
    /// The scrypt parameters are read and bounded before the KDF runs: at most
    /// ``ScryptParameters/maximum``, so a crafted input costs no more than one guess.
    ///
    /// - Throws: ``IdentityError/Code/wrongPassphrase`` when the passphrase does not
    ///   decrypt it, ``IdentityError/Code/keyDerivationRefused`` when its KDF, cipher or
    ///   parameters are not what Hearth writes, ``IdentityError/Code/invalidKey`` when
    ///   there is no well-formed key to decrypt.
    package convenience init(encryptedPEMRepresentation pem: String, passphrase: String) throws {
        try self.init(sealed: try EncryptedPrivateKeyInfo(pem: pem), passphrase: passphrase)
    }

    /// Decrypts an already parsed (and so already bounded) encrypted key; see
    /// ``init(encryptedPEMRepresentation:passphrase:)``.
    package convenience init(sealed: EncryptedPrivateKeyInfo, passphrase: String) throws {
        _ = OpenSSLRuntime.ready
        var passBytes = Array(passphrase.utf8)
        defer { for i in passBytes.indices { passBytes[i] = 0 } }
        var plaintext = try sealed.open(passphrase: passBytes)
        defer { for i in plaintext.indices { plaintext[i] = 0 } }
        let key = plaintext.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            guard let info = d2i_PKCS8_PRIV_KEY_INFO(nil, &cursor, buffer.count) else { return nil }
            defer { PKCS8_PRIV_KEY_INFO_free(info) }
            return EVP_PKCS82PKEY(info)
        }
        guard let key else {
            // Padding that checks out by chance (about 1 in 256 wrong keys) leaves bytes
            // that do not parse as a key: a wrong passphrase too.
            throw IdentityError.openSSL("decrypting the private key", code: .wrongPassphrase)
        }
        try self.init(taking: key)
    }

    deinit { EVP_PKEY_free(pointer) }

    /// The public half.
    package var publicKey: Ed25519PublicKey {
        // EVP_PKEY holds both halves; extracting the raw public bytes makes a key object
        // that cannot leak the private half.
        var bytes = [UInt8](repeating: 0, count: 32)
        var length = 32
        let ok = EVP_PKEY_get_raw_public_key(pointer, &bytes, &length)
        precondition(ok == 1 && length == 32, "EVP_PKEY_get_raw_public_key failed on an Ed25519 key")
        return try! Ed25519PublicKey(rawRepresentation: bytes)
    }

    /// The Ed25519 signature (64 bytes) of `message`. Deterministic (RFC 8032).
    package func signature(for message: some Collection<UInt8>) throws -> [UInt8] {
        let message = Array(message)
        guard let context = EVP_MD_CTX_new() else { throw IdentityError.openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, nil, nil, pointer) == 1 else {
            throw IdentityError.openSSL("EVP_DigestSignInit(Ed25519)")
        }
        var signature = [UInt8](repeating: 0, count: 64)
        var length = 64
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1, length == 64 else {
            throw IdentityError.openSSL("EVP_DigestSign(Ed25519)")
        }
        return signature
    }

    /// Unencrypted PKCS#8 PEM ("PRIVATE KEY"), for a file of mode 0600.
    package func pemRepresentation() throws -> String {
        guard let bytes = MemoryBIO.collect({ bio in
            PEM_write_bio_PrivateKey(bio, pointer, nil, nil, 0, nil, nil) == 1
        }) else { throw IdentityError.openSSL("writing the private key as PKCS#8") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Encrypted PKCS#8 PEM ("ENCRYPTED PRIVATE KEY"): PBES2 with scrypt
    /// (``ScryptParameters/standard``) and AES-256-CBC, a fresh random salt and IV each
    /// time. OpenSSL's own PKCS#8 reader caps scrypt at 32 MiB, so `openssl pkey` cannot
    /// open it; ``init(encryptedPEMRepresentation:passphrase:)`` can.
    package func encryptedPEMRepresentation(passphrase: String) throws -> String {
        try encryptedPEMRepresentation(passphrase: passphrase, scrypt: .standard)
    }

    /// The same with chosen scrypt parameters: for cheap test clusters (a writer's
    /// choice only; readers accept at most ``ScryptParameters/maximum``).
    package func encryptedPEMRepresentation(passphrase: String, scrypt: ScryptParameters) throws -> String {
        try sealed(passphrase: passphrase, scrypt: scrypt).pem
    }

    /// The key sealed under `passphrase` with `scrypt`, as a parsed structure (what an
    /// account's `ca.key` and a join bundle hold).
    package func sealed(passphrase: String, scrypt: ScryptParameters) throws -> EncryptedPrivateKeyInfo {
        guard !passphrase.isEmpty else { throw IdentityError(code: .invalidArgument, message: "the passphrase is empty") }
        guard scrypt.isWithinMaximum else {
            throw IdentityError(code: .invalidArgument, message: "scrypt \(scrypt) is beyond what readers accept (\(ScryptParameters.maximum))")
        }
        guard let info = EVP_PKEY2PKCS8(pointer) else { throw IdentityError.openSSL("EVP_PKEY2PKCS8") }
        defer { PKCS8_PRIV_KEY_INFO_free(info) }
        let length = i2d_PKCS8_PRIV_KEY_INFO(info, nil)
        guard length > 0 else { throw IdentityError.openSSL("i2d_PKCS8_PRIV_KEY_INFO") }
        var plaintext = [UInt8](repeating: 0, count: Int(length))
        defer { for i in plaintext.indices { plaintext[i] = 0 } }
        let written = plaintext.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_PKCS8_PRIV_KEY_INFO(info, &cursor)
        }
        guard written == length else { throw IdentityError.openSSL("i2d_PKCS8_PRIV_KEY_INFO") }
        var passBytes = Array(passphrase.utf8)
        defer { for i in passBytes.indices { passBytes[i] = 0 } }
        return try EncryptedPrivateKeyInfo(sealing: plaintext, passphrase: passBytes, parameters: scrypt)
    }
}
