import CHearthOpenSSL
import Foundation

/// A PKCS#8 EncryptedPrivateKeyInfo sealed with PBES2 (RFC 8018): scrypt (RFC 7914) and
/// AES-256-CBC: the CA key of a join bundle, and of an account's `ca.key`.
///
/// Parsed and written here rather than by OpenSSL's PEM functions for two reasons:
/// the scrypt parameters come from the (untrusted) bundle or file and must be bounded before the
/// KDF runs, and OpenSSL's PKCS#8 code caps scrypt at 32 MiB, below what Hearth writes
/// (N = 2^18, r = 8: 256 MiB). The crypto itself is OpenSSL's (EVP_PBE_scrypt, EVP AES).
package struct EncryptedPrivateKeyInfo: Sendable {
    static let pemLabel = "ENCRYPTED PRIVATE KEY"
    /// 1.2.840.113549.1.5.13
    static let pbes2: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x05, 0x0D]
    /// 1.3.6.1.4.1.11591.4.11
    static let scrypt: [UInt8] = [0x2B, 0x06, 0x01, 0x04, 0x01, 0xDA, 0x47, 0x04, 0x0B]
    /// 2.16.840.1.101.3.4.1.42
    static let aes256CBC: [UInt8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x2A]
    /// An Ed25519 PKCS#8 is 48 bytes; anything far larger is not a key Hearth wrote.
    static let maximumCiphertext = 1024
    static let keyLength = 32

    var salt: [UInt8]
    package var parameters: ScryptParameters
    var iv: [UInt8]
    var ciphertext: [UInt8]

    /// Parses the first "ENCRYPTED PRIVATE KEY" block of `pem`, without running the KDF.
    ///
    /// - Throws: ``IdentityError/Code/keyDerivationRefused`` when the KDF, its parameters
    ///   or the cipher are other than or costlier than Hearth writes;
    ///   ``IdentityError/Code/invalidKey`` when it is not a well-formed encrypted key.
    package init(pem: String) throws(IdentityError) {
        let begin = "-----BEGIN \(Self.pemLabel)-----", end = "-----END \(Self.pemLabel)-----"
        guard let start = pem.range(of: begin), let stop = pem.range(of: end, range: start.upperBound..<pem.endIndex) else {
            throw IdentityError(code: .invalidKey, message: "no encrypted private key in the input")
        }
        let body = pem[start.upperBound..<stop.lowerBound]
        guard body.utf8.count <= 4 * Self.maximumCiphertext,
              let der = Data(base64Encoded: String(body), options: .ignoreUnknownCharacters) else {
            throw IdentityError(code: .invalidKey, message: "the encrypted private key is not valid base64 of a reasonable size")
        }
        try self.init(der: ArraySlice(der))
    }

    /// Parses DER, without running the KDF; see ``init(pem:)``.
    init(der: ArraySlice<UInt8>) throws(IdentityError) {
        do {
            var outer = DERReader(der)
            var info = try outer.sequence("EncryptedPrivateKeyInfo")
            try outer.expectEnd("EncryptedPrivateKeyInfo")
            var algorithm = try info.sequence("encryptionAlgorithm")
            guard Array(try algorithm.read(tag: 0x06, "encryption algorithm")) == Self.pbes2 else {
                throw IdentityError(code: .keyDerivationRefused, message: "the key is not encrypted with PBES2, the only scheme Hearth writes")
            }
            var pbes2 = try algorithm.sequence("PBES2 parameters")
            try algorithm.expectEnd("encryptionAlgorithm")
            var kdf = try pbes2.sequence("key derivation function")
            guard Array(try kdf.read(tag: 0x06, "key derivation function")) == Self.scrypt else {
                throw IdentityError(code: .keyDerivationRefused, message: "the key's passphrase is derived by another function than scrypt, the only one Hearth writes")
            }
            var scrypt = try kdf.sequence("scrypt parameters")
            try kdf.expectEnd("key derivation function")
            salt = Array(try scrypt.read(tag: 0x04, "scrypt salt"))
            let n = try scrypt.unsignedInteger("scrypt N")
            let r = try scrypt.unsignedInteger("scrypt r")
            let p = try scrypt.unsignedInteger("scrypt p")
            if !scrypt.isAtEnd {
                let length = try scrypt.unsignedInteger("scrypt key length")
                guard length == UInt64(Self.keyLength) else {
                    throw IdentityError(code: .keyDerivationRefused, message: "the key asks scrypt for a \(length)-byte key; AES-256 takes \(Self.keyLength)")
                }
            }
            try scrypt.expectEnd("scrypt parameters")
            parameters = ScryptParameters(n: n, r: r, p: p)
            // The bound that matters: checked before anything is derived.
            guard parameters.isWithinMaximum else {
                throw IdentityError(code: .keyDerivationRefused,
                                    message: "the key asks for scrypt \(parameters); Hearth writes and reads at most \(ScryptParameters.maximum)")
            }
            guard (1...64).contains(salt.count) else {
                throw IdentityError(code: .keyDerivationRefused, message: "the scrypt salt is \(salt.count) bytes (1 to 64 accepted)")
            }
            var cipher = try pbes2.sequence("encryption scheme")
            try pbes2.expectEnd("PBES2 parameters")
            guard Array(try cipher.read(tag: 0x06, "cipher")) == Self.aes256CBC else {
                throw IdentityError(code: .keyDerivationRefused, message: "the key is encrypted with another cipher than AES-256-CBC, the only one Hearth writes")
            }
            iv = Array(try cipher.read(tag: 0x04, "AES IV"))
            try cipher.expectEnd("encryption scheme")
            guard iv.count == 16 else { throw IdentityError(code: .invalidKey, message: "the AES IV is \(iv.count) bytes, not 16") }
            ciphertext = Array(try info.read(tag: 0x04, "encrypted key"))
            try info.expectEnd("EncryptedPrivateKeyInfo")
            guard !ciphertext.isEmpty, ciphertext.count % 16 == 0, ciphertext.count <= Self.maximumCiphertext else {
                throw IdentityError(code: .invalidKey, message: "the encrypted key is \(ciphertext.count) bytes, not a whole number of AES blocks up to \(Self.maximumCiphertext)")
            }
        } catch let error as DERError {
            throw IdentityError(code: .invalidKey, message: "the encrypted private key is malformed: \(error.message)")
        } catch let error as IdentityError {
            throw error
        } catch {
            throw IdentityError(code: .invalidKey, message: "the encrypted private key is malformed: \(error)")
        }
    }

    /// Encrypts `plaintext` (a PKCS#8 PrivateKeyInfo) under `passphrase` with a fresh
    /// random salt and IV.
    init(sealing plaintext: [UInt8], passphrase: [UInt8], parameters: ScryptParameters) throws(IdentityError) {
        _ = OpenSSLRuntime.ready
        salt = try Self.random(16)
        iv = try Self.random(16)
        self.parameters = parameters
        var key = try Self.derive(passphrase: passphrase, salt: salt, parameters: parameters)
        defer { for i in key.indices { key[i] = 0 } }
        ciphertext = try Self.aes(encrypt: true, plaintext, key: key, iv: iv)
    }

    /// Decrypts with `passphrase`: the PKCS#8 PrivateKeyInfo, or
    /// ``IdentityError/Code/wrongPassphrase`` when the padding does not check out.
    func open(passphrase: [UInt8]) throws(IdentityError) -> [UInt8] {
        _ = OpenSSLRuntime.ready
        var key = try Self.derive(passphrase: passphrase, salt: salt, parameters: parameters)
        defer { for i in key.indices { key[i] = 0 } }
        do {
            return try Self.aes(encrypt: false, ciphertext, key: key, iv: iv)
        } catch {
            // AES-CBC with a wrong key fails its padding check nearly always.
            throw IdentityError(code: .wrongPassphrase, message: "decrypting the private key", openSSLReasons: error.openSSLReasons)
        }
    }

    package var der: [UInt8] {
        DERWriter.sequence(
            DERWriter.sequence(
                DERWriter.element(0x06, Self.pbes2),
                DERWriter.sequence(
                    DERWriter.sequence(
                        DERWriter.element(0x06, Self.scrypt),
                        DERWriter.sequence(DERWriter.octetString(salt), DERWriter.integer(parameters.n),
                                           DERWriter.integer(parameters.r), DERWriter.integer(parameters.p))),
                    DERWriter.sequence(DERWriter.element(0x06, Self.aes256CBC), DERWriter.octetString(iv)))),
            DERWriter.octetString(ciphertext))
    }

    package var pem: String {
        let base64 = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN \(Self.pemLabel)-----\n\(base64)\n-----END \(Self.pemLabel)-----\n"
    }

    private static func random(_ count: Int) throws(IdentityError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&bytes, Int32(count)) == 1 else { throw IdentityError.openSSL("RAND_bytes") }
        return bytes
    }

    /// scrypt, given exactly the memory these (already bounded) parameters need.
    private static func derive(passphrase: [UInt8], salt: [UInt8], parameters: ScryptParameters) throws(IdentityError) -> [UInt8] {
        var key = [UInt8](repeating: 0, count: keyLength)
        let ok = passphrase.withUnsafeBufferPointer { pass in
            pass.withMemoryRebound(to: CChar.self) { chars in
                EVP_PBE_scrypt(chars.baseAddress, chars.count, salt, salt.count, parameters.n, parameters.r, parameters.p,
                               parameters.memoryBytes + 65_536, &key, key.count)
            }
        }
        guard ok == 1 else { throw IdentityError.openSSL("scrypt (\(parameters))") }
        return key
    }

    private static func aes(encrypt: Bool, _ input: [UInt8], key: [UInt8], iv: [UInt8]) throws(IdentityError) -> [UInt8] {
        guard let context = EVP_CIPHER_CTX_new() else { throw IdentityError.openSSL("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        guard EVP_CipherInit_ex(context, EVP_aes_256_cbc(), nil, key, iv, encrypt ? 1 : 0) == 1 else {
            throw IdentityError.openSSL("EVP_CipherInit_ex(AES-256-CBC)")
        }
        var output = [UInt8](repeating: 0, count: input.count + 16)
        var written: Int32 = 0, final: Int32 = 0
        let ok = output.withUnsafeMutableBufferPointer { out in
            EVP_CipherUpdate(context, out.baseAddress, &written, input, Int32(input.count)) == 1
                && EVP_CipherFinal_ex(context, out.baseAddress! + Int(written), &final) == 1
        }
        guard ok else {
            for i in output.indices { output[i] = 0 }
            throw IdentityError.openSSL(encrypt ? "AES-256-CBC encryption" : "AES-256-CBC decryption")
        }
        return Array(output.prefix(Int(written + final)))
    }
}
