import CHearthOpenSSL
import Foundation

/// A failure in the identity layer: keys, certificates, signatures, accounts, join bundles.
///
/// The `code` says what kind of failure it is, so callers can react (ask again for a
/// passphrase, tell the user to sign in); `message` says what was being done, and
/// `openSSLReasons` carries OpenSSL's own reason strings from its error queue when the
/// failure came from the library. New codes can be added without breaking callers.
package struct IdentityError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure. Extensible: compare against the static members.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        package let name: String
        package init(_ name: String) { self.name = name }
        package var description: String { name }

        /// An OpenSSL call failed; see ``IdentityError/openSSLReasons``.
        package static let openSSL = Code("openSSL")
        /// Bytes are not a valid Ed25519 key.
        package static let invalidKey = Code("invalidKey")
        /// Bytes are not a usable certificate.
        package static let invalidCertificate = Code("invalidCertificate")
        /// A certificate does not chain to the account CA, is outside its validity
        /// period, or has the wrong usage.
        package static let certificateRejected = Code("certificateRejected")
        /// A signature does not verify.
        package static let badSignature = Code("badSignature")
        /// No certificate is known for the signing device.
        package static let unknownSigner = Code("unknownSigner")
        /// The signer was removed from the account before the entry's timestamp.
        package static let removedSigner = Code("removedSigner")
        /// The passphrase does not open the join bundle, or the account's CA key.
        package static let wrongPassphrase = Code("wrongPassphrase")
        /// The join bundle is truncated, altered, or not a join bundle at all.
        package static let damagedBundle = Code("damagedBundle")
        /// The sealed CA key (a join bundle's, or an account's `ca.key`) is protected by another
        /// KDF or cipher than Hearth writes, or by scrypt parameters costlier than
        /// ``ScryptParameters/maximum``: refused before any key derivation, so a crafted bundle
        /// or file cannot hang the reader.
        package static let keyDerivationRefused = Code("keyDerivationRefused")
        /// The operation needs a current account and there is none.
        package static let notSignedIn = Code("notSignedIn")
        /// No account with that ID is stored on this device.
        package static let unknownAccount = Code("unknownAccount")
        /// The account's files are missing, unreadable or inconsistent.
        package static let damagedAccount = Code("damagedAccount")
        /// A file-system call failed.
        package static let fileSystem = Code("fileSystem")
        /// An argument is out of range (an empty name or passphrase).
        package static let invalidArgument = Code("invalidArgument")
        /// This device holds no CA key for the account, so it cannot admit or remove
        /// devices (``CAKeyStatus/absent``).
        package static let caKeyAbsent = Code("caKeyAbsent")
        /// The account's CA key is stored unencrypted, as Hearth stored it before it sealed
        /// it under the account passphrase (``CAKeyStatus/clear``): it must be protected
        /// (``AccountStore/protectAuthority(_:passphrase:)``) before it is used.
        package static let caKeyInClear = Code("caKeyInClear")
    }

    package var code: Code
    /// What was being done, in words.
    package var message: String
    /// OpenSSL's reason strings (e.g. "bad decrypt"), oldest first; empty when the
    /// failure did not come from OpenSSL.
    package var openSSLReasons: [String]

    package init(code: Code, message: String, openSSLReasons: [String] = []) {
        self.code = code
        self.message = message
        self.openSSLReasons = openSSLReasons
    }

    package var description: String {
        var text = "\(code): \(message)"
        if !openSSLReasons.isEmpty { text += " (OpenSSL: " + openSSLReasons.joined(separator: "; ") + ")" }
        return text
    }

    /// An OpenSSL failure while doing `operation`, carrying (and clearing) the thread's
    /// OpenSSL error queue.
    package static func openSSL(_ operation: String, code: Code = .openSSL) -> IdentityError {
        IdentityError(code: code, message: operation, openSSLReasons: OpenSSLErrorQueue.drain())
    }

    package static func invalidKey(_ message: String) -> IdentityError {
        .openSSL(message, code: .invalidKey)
    }

    package static func invalidCertificate(_ message: String) -> IdentityError {
        .openSSL(message, code: .invalidCertificate)
    }

    package static func certificateRejected(_ reason: String) -> IdentityError {
        IdentityError(code: .certificateRejected, message: reason, openSSLReasons: OpenSSLErrorQueue.drain())
    }

    package static func badSignature(_ message: String) -> IdentityError {
        IdentityError(code: .badSignature, message: message, openSSLReasons: OpenSSLErrorQueue.drain())
    }

    package static func fileSystem(_ operation: String, path: String, errno: Int32 = Glibc.errno) -> IdentityError {
        IdentityError(code: .fileSystem, message: "\(operation) \(path): \(String(cString: strerror(errno)))")
    }
}

/// OpenSSL keeps a per-thread queue of errors. Reading it right after a failing call, on
/// the same thread, gives the library's own reason for the failure.
package enum OpenSSLErrorQueue {
    /// Empties the calling thread's queue and returns the reason strings, oldest first.
    package static func drain() -> [String] {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if let reason = ERR_reason_error_string(code) {
                reasons.append(String(cString: reason))
            } else {
                var buffer = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(code, &buffer, buffer.count)
                reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
        }
        return reasons
    }

    /// Forgets stale errors before a call whose failure is about to be diagnosed.
    package static func clear() { ERR_clear_error() }
}
