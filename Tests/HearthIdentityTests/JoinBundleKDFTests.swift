import Foundation
@testable import HearthIdentity
import Testing

/// Issue 12, points 7 and 8: a bundle's KDF parameters are bounded before the KDF runs,
/// and what Hearth writes costs about a second per guess.
@Suite("Join bundle KDF bounds")
struct JoinBundleKDFTests {
    /// A cheap bundle to tamper with.
    static func cheapBundle() throws -> (authority: AccountAuthority, bundle: Data) {
        let authority = try AccountAuthority.create(displayName: "Home")
        return (authority, try JoinBundle.export(authority, passphrase: "pw", scrypt: .testing))
    }

    /// `bundle` with its key's DER rewritten by `change`.
    static func tampered(_ bundle: Data, _ change: (inout [UInt8]) -> Void) throws -> Data {
        let text = String(decoding: bundle, as: UTF8.self)
        let start = try #require(text.range(of: "-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        var der = try EncryptedPrivateKeyInfo(pem: String(text[start.lowerBound...])).der
        change(&der)
        let base64 = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return Data((text[..<start.lowerBound] + "-----BEGIN ENCRYPTED PRIVATE KEY-----\n\(base64)\n-----END ENCRYPTED PRIVATE KEY-----\n").utf8)
    }

    /// `bundle` with its key's scrypt parameters set to `parameters` (the ciphertext unchanged).
    static func withParameters(_ bundle: Data, _ parameters: ScryptParameters, keyLength: UInt64? = nil) throws -> Data {
        let text = String(decoding: bundle, as: UTF8.self)
        let start = try #require(text.range(of: "-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        var info = try EncryptedPrivateKeyInfo(pem: String(text[start.lowerBound...]))
        info.parameters = parameters
        var der = info.der
        if let keyLength {
            // Append keyLength to scrypt-params: rebuild from the parts.
            der = DERWriter.sequence(
                DERWriter.sequence(
                    DERWriter.element(0x06, EncryptedPrivateKeyInfo.pbes2),
                    DERWriter.sequence(
                        DERWriter.sequence(
                            DERWriter.element(0x06, EncryptedPrivateKeyInfo.scrypt),
                            DERWriter.sequence(DERWriter.octetString(info.salt), DERWriter.integer(parameters.n),
                                               DERWriter.integer(parameters.r), DERWriter.integer(parameters.p), DERWriter.integer(keyLength))),
                        DERWriter.sequence(DERWriter.element(0x06, EncryptedPrivateKeyInfo.aes256CBC), DERWriter.octetString(info.iv)))),
                DERWriter.octetString(info.ciphertext))
        }
        let base64 = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return Data((text[..<start.lowerBound] + "-----BEGIN ENCRYPTED PRIVATE KEY-----\n\(base64)\n-----END ENCRYPTED PRIVATE KEY-----\n").utf8)
    }

    /// Runs `work` on a new thread and waits for it without holding a thread of the pool.
    static func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
        }
    }

    static func replacing(_ old: [UInt8], with new: [UInt8], in der: inout [UInt8]) {
        precondition(old.count == new.count)
        for i in 0...(der.count - old.count) where Array(der[i..<(i + old.count)]) == old {
            der.replaceSubrange(i..<(i + old.count), with: new)
            return
        }
        preconditionFailure("not found")
    }

    @Test("Costly scrypt parameters (p = 8000, N = 2^40, r = 1024, a 64-byte key) are refused before the KDF runs, in well under a second")
    func costlyParametersRefusedFast() throws {
        let (_, bundle) = try Self.cheapBundle()
        let crafted: [(String, Data)] = [
            ("p = 8000", try Self.withParameters(bundle, ScryptParameters(n: 1 << 14, r: 8, p: 8000))),
            ("N = 2^40", try Self.withParameters(bundle, ScryptParameters(n: 1 << 40, r: 8, p: 1))),
            ("N = 2^19", try Self.withParameters(bundle, ScryptParameters(n: 1 << 19, r: 8, p: 1))),
            ("r = 1024", try Self.withParameters(bundle, ScryptParameters(n: 1 << 14, r: 1024, p: 1))),
            ("N not a power of two", try Self.withParameters(bundle, ScryptParameters(n: 100_000, r: 8, p: 1))),
            ("N = 2^63 + 1", try Self.withParameters(bundle, ScryptParameters(n: 1 << 63 + 1, r: 8, p: 1))),
            ("keyLength = 64", try Self.withParameters(bundle, .testing, keyLength: 64)),
        ]
        for (name, data) in crafted {
            let clock = ContinuousClock()
            var caught: IdentityError?
            let elapsed = clock.measure {
                do { _ = try JoinBundle.open(data, passphrase: "pw") } catch { caught = error as? IdentityError }
            }
            #expect(caught?.code == .keyDerivationRefused, "\(name): \(String(describing: caught))")
            #expect(elapsed < .milliseconds(500), "\(name) took \(elapsed)")
        }
        // The message says what was asked and what is accepted.
        let message = try #require(try? { () throws -> String? in
            do { _ = try JoinBundle.open(crafted[0].1, passphrase: "pw"); return nil } catch let error as IdentityError { return error.message }
        }())
        #expect(message.contains("p = 8000") && message.contains("at most N = 2^18, r = 8, p = 1"), "\(message)")
    }

    @Test("Another KDF than scrypt, or another cipher than AES-256-CBC, is refused before any derivation")
    func otherAlgorithmsRefused() throws {
        let (_, bundle) = try Self.cheapBundle()
        // PBKDF2 (1.2.840.113549.1.5.12) in place of scrypt; AES-128-CBC in place of AES-256-CBC.
        let pbkdf2 = try Self.tampered(bundle) {
            Self.replacing(EncryptedPrivateKeyInfo.scrypt, with: [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x05, 0x0C], in: &$0)
        }
        let aes128 = try Self.tampered(bundle) {
            Self.replacing(EncryptedPrivateKeyInfo.aes256CBC, with: [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x02], in: &$0)
        }
        let pbes1 = try Self.tampered(bundle) {
            Self.replacing(EncryptedPrivateKeyInfo.pbes2, with: [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x05, 0x03], in: &$0)
        }
        for (name, data) in [("PBKDF2", pbkdf2), ("AES-128-CBC", aes128), ("PBES1", pbes1)] {
            let error = #expect(throws: IdentityError.self, "\(name)") { try JoinBundle.open(data, passphrase: "pw") }
            #expect(error?.code == .keyDerivationRefused, "\(name): \(String(describing: error))")
        }
        // Truncated DER is damaged, not a crash.
        let truncated = try Self.tampered(bundle) { $0.removeLast(20) }
        let error = #expect(throws: IdentityError.self) { try JoinBundle.open(truncated, passphrase: "pw") }
        #expect(error?.code == .damagedBundle)
        // An oversized file is refused before parsing.
        let huge = bundle + Data(repeating: 0x41, count: JoinBundle.maximumSize)
        #expect((#expect(throws: IdentityError.self) { try JoinBundle.open(huge, passphrase: "pw") })?.code == .damagedBundle)
    }

    @Test("Hearth writes scrypt N = 2^18, r = 8, p = 1 and reads it back; bundles with the older N = 2^14 still open")
    func standardParametersWrittenAndOlderRead() async throws {
        let authority = try AccountAuthority.create(displayName: "Home")
        let clock = ContinuousClock()
        // Each derivation takes 256 MB and about a second, tens of seconds on a loaded machine:
        // on a thread of its own, not on the cooperative pool (two threads here), where it would
        // stall every other test's async work meanwhile (a streak run with 4 CPU hogs saw this
        // test take 99 s, and a clock-skew test miss its 10 s convergence beside it).
        let start = clock.now
        let bundle = try await Self.offPool { try JoinBundle.export(authority, passphrase: "tidy kettle orbit") }
        let sealing = clock.now - start
        let text = String(decoding: bundle, as: UTF8.self)
        let key = try EncryptedPrivateKeyInfo(pem: String(text[try #require(text.range(of: "-----BEGIN ENCRYPTED")).lowerBound...]))
        #expect(key.parameters == ScryptParameters.standard)
        #expect(ScryptParameters.standard == ScryptParameters(n: 1 << 18, r: 8, p: 1))
        #expect(key.salt.count == 16)
        let opening = clock.now
        let opened: AccountAuthority? = try await Self.offPool { try JoinBundle.open(bundle, passphrase: "tidy kettle orbit") }
        let guess = clock.now - opening
        #expect(opened?.account.id == authority.account.id)
        // The cost of one guess, for docs/security.md (not asserted: the machine is shared).
        print("join bundle scrypt \(ScryptParameters.standard): sealing took \(sealing), one opening (one guess) took \(guess)")

        let older = try JoinBundle.export(authority, passphrase: "pw", scrypt: ScryptParameters(n: 1 << 14, r: 8, p: 1))
        #expect(try JoinBundle.open(older, passphrase: "pw").account.id == authority.account.id)
        #expect((#expect(throws: IdentityError.self) { try JoinBundle.open(older, passphrase: "wrong") })?.code == .wrongPassphrase)
    }
}
