/// What a module's errors are about: their name and their codes.
///
/// Each module declares one domain and names its error type after it:
///
/// ```swift
/// package enum TLSErrors: HearthErrorDomain {}
/// package typealias TLSError = HearthError<TLSErrors>
///
/// extension ErrorCode where Domain == TLSErrors {
///     /// The TLS handshake failed.
///     package static var handshakeFailed: Self { Self("handshakeFailed") }
/// }
/// ```
package protocol HearthErrorDomain: Sendable {
    /// The domain's codes: by default ``ErrorCode``s of the domain.
    associatedtype Code: HearthErrorCode = ErrorCode<Self>
    /// The error type's name, as `debugDescription` shows it: by default the domain's name
    /// without its plural `s` (`TLSErrors` names `TLSError`).
    static var name: String { get }
    /// How an error of this domain reads in a log line or the command's output (by default, its
    /// reason).
    static func describe(code: Code, reason: String) -> String
}

extension HearthErrorDomain {
    package static var name: String {
        let plural = String(describing: Self.self)
        return plural.hasSuffix("s") ? String(plural.dropLast()) : plural
    }

    package static func describe(code: Code, reason: String) -> String { reason }
}

/// An error code: opaque and extensible (new codes do not break a `switch`), compared with the
/// static members of its type (`error.code == .handshakeFailed`).
package protocol HearthErrorCode: Hashable, Sendable, CustomStringConvertible {}

/// The one shape of every error Hearth's modules throw, after swift-certificates'
/// `CertificateError`: a code saying what kind of failure it is (for code to react to), a
/// reason saying what happened (for people), the error underneath if there was one, and where
/// it was thrown. Two errors are equal when their codes are: the reason is prose and may change.
///
/// ```swift
/// do { try bundle.open(passphrase: typed) }
/// catch let error as IdentityError where error.code == .wrongPassphrase { askAgain() }
/// ```
///
/// Each module makes its errors with factories that record the file and line
/// (`TLSError.handshakeFailed("…")`); the public store has its own error of the same shape,
/// `KeyValueStoreError`, which also names the key.
package struct HearthError<Domain: HearthErrorDomain>: Error, Hashable, Sendable, CustomStringConvertible,
    CustomDebugStringConvertible {
    package typealias Code = Domain.Code

    /// What kind of failure this is.
    package var code: Code
    /// What happened, in words.
    package var reason: String
    /// The error that caused this one, if any (a system call's, OpenSSL's, another module's).
    package var underlying: (any Error & Sendable)?
    /// Where the error was made.
    package var file: String
    package var line: UInt

    package init(_ code: Code, _ reason: String, underlying: (any Error & Sendable)? = nil,
                 file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.reason = reason
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    /// The same, with the labels most call sites use.
    package init(code: Code, reason: String, underlying: (any Error & Sendable)? = nil,
                 file: String = #fileID, line: UInt = #line) {
        self.init(code, reason, underlying: underlying, file: file, line: line)
    }

    package static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }

    package func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// What logs and the command print: the reason as the domain words it, then the
    /// underlying error.
    package var description: String {
        let text = Domain.describe(code: code, reason: reason)
        guard let underlying else { return text }
        return "\(text) (\(underlying))"
    }

    /// The type, the code, the reason and where the error was made.
    package var debugDescription: String {
        "\(Domain.name).\(code): \(description) [\(file):\(line)]"
    }
}

/// A code known by its name: what the domains' codes are. A domain lists its codes as static
/// members of `ErrorCode<Itself>`:
///
/// ```swift
/// extension ErrorCode where Domain == TLSErrors {
///     /// The TLS handshake failed.
///     package static var handshakeFailed: Self { Self("handshakeFailed") }
/// }
/// ```
package struct ErrorCode<Domain>: HearthErrorCode {
    private let name: String

    package init(_ name: String) { self.name = name }

    package var description: String { name }
}
