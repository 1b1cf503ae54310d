import CHearthOpenSSL
import Foundation
import HearthCore

/// A failure in the identity layer: keys, certificates, signatures, accounts, join bundles.
///
/// The `code` says what kind of failure it is, so callers can react (ask again for a
/// passphrase, tell the user to sign in); `reason` says what was being done, and
/// ``HearthError/openSSLReasons`` carries OpenSSL's own reason strings from its error queue
/// when the failure came from the library. New codes can be added without breaking callers.
package typealias IdentityError = HearthError<IdentityErrors>

/// The domain of ``IdentityError``.
package enum IdentityErrors: HearthErrorDomain {
    package static func describe(code: ErrorCode<IdentityErrors>, reason: String) -> String { "\(code): \(reason)" }
}

extension ErrorCode where Domain == IdentityErrors {
    /// An OpenSSL call failed; see ``HearthError/openSSLReasons``.
    package static var openSSL: Self { Self("openSSL") }
    /// Bytes are not a valid Ed25519 key.
    package static var invalidKey: Self { Self("invalidKey") }
    /// Bytes are not a usable certificate.
    package static var invalidCertificate: Self { Self("invalidCertificate") }
    /// A certificate does not chain to the account CA, is outside its validity
    /// period, or has the wrong usage.
    package static var certificateRejected: Self { Self("certificateRejected") }
    /// A signature does not verify.
    package static var badSignature: Self { Self("badSignature") }
    /// No certificate is known for the signing device.
    package static var unknownSigner: Self { Self("unknownSigner") }
    /// The signer was removed from the account before the entry's timestamp.
    package static var removedSigner: Self { Self("removedSigner") }
    /// The passphrase does not open the join bundle, or the account's CA key.
    package static var wrongPassphrase: Self { Self("wrongPassphrase") }
    /// The join bundle is truncated, altered, or not a join bundle at all.
    package static var damagedBundle: Self { Self("damagedBundle") }
    /// The sealed CA key (a join bundle's, or an account's `ca.key`) is protected by another
    /// KDF or cipher than Hearth writes, or by scrypt parameters costlier than
    /// ``ScryptParameters/maximum``: refused before any key derivation, so a crafted bundle
    /// or file cannot hang the reader.
    package static var keyDerivationRefused: Self { Self("keyDerivationRefused") }
    /// The operation needs a current account and there is none.
    package static var notSignedIn: Self { Self("notSignedIn") }
    /// No account with that ID is stored on this device.
    package static var unknownAccount: Self { Self("unknownAccount") }
    /// The account's files are missing, unreadable or inconsistent.
    package static var damagedAccount: Self { Self("damagedAccount") }
    /// A file-system call failed.
    package static var fileSystem: Self { Self("fileSystem") }
    /// An argument is out of range (an empty name or passphrase).
    package static var invalidArgument: Self { Self("invalidArgument") }
    /// This device holds no CA key for the account, so it cannot admit or remove
    /// devices (``CAKeyStatus/absent``).
    package static var caKeyAbsent: Self { Self("caKeyAbsent") }
    /// The account's CA key is stored unencrypted, as Hearth stored it before it sealed
    /// it under the account passphrase (``CAKeyStatus/clear``): it must be protected
    /// (``AccountStore/protectAuthority(_:passphrase:)``) before it is used.
    package static var caKeyInClear: Self { Self("caKeyInClear") }
}

/// OpenSSL's reason strings for a failure, oldest first: an ``IdentityError``'s underlying error.
package struct OpenSSLReasons: Error, Hashable, Sendable, CustomStringConvertible {
    package var reasons: [String]

    package var description: String { "OpenSSL: " + reasons.joined(separator: "; ") }
}

extension HearthError where Domain == IdentityErrors {
    /// An error of `code`; `openSSLReasons`, if any, are kept as the underlying error.
    package init(code: Code, message: String, openSSLReasons: [String] = [], file: String = #fileID, line: UInt = #line) {
        self.init(code, message, underlying: openSSLReasons.isEmpty ? nil : OpenSSLReasons(reasons: openSSLReasons),
                  file: file, line: line)
    }

    /// What was being done, in words (the ``HearthError/reason``).
    package var message: String { reason }

    /// OpenSSL's reason strings (e.g. "bad decrypt"), oldest first; empty when the
    /// failure did not come from OpenSSL.
    package var openSSLReasons: [String] { (underlying as? OpenSSLReasons)?.reasons ?? [] }

    /// An OpenSSL failure while doing `operation`, carrying (and clearing) the thread's
    /// OpenSSL error queue.
    package static func openSSL(_ operation: String, code: Code = .openSSL, file: String = #fileID, line: UInt = #line) -> Self {
        Self(code: code, message: operation, openSSLReasons: OpenSSLErrorQueue.drain(), file: file, line: line)
    }

    package static func invalidKey(_ message: String, file: String = #fileID, line: UInt = #line) -> Self {
        .openSSL(message, code: .invalidKey, file: file, line: line)
    }

    package static func invalidCertificate(_ message: String, file: String = #fileID, line: UInt = #line) -> Self {
        .openSSL(message, code: .invalidCertificate, file: file, line: line)
    }

    package static func certificateRejected(_ reason: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(code: .certificateRejected, message: reason, openSSLReasons: OpenSSLErrorQueue.drain(), file: file, line: line)
    }

    package static func badSignature(_ message: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(code: .badSignature, message: message, openSSLReasons: OpenSSLErrorQueue.drain(), file: file, line: line)
    }

    package static func fileSystem(_ operation: String, path: String, errno: Int32 = Glibc.errno,
                                   file: String = #fileID, line: UInt = #line) -> Self {
        Self(code: .fileSystem, message: "\(operation) \(path): \(String(cString: strerror(errno)))", file: file, line: line)
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
