import HearthCore

/// A frame of the local attach protocol that could not be understood (docs/local-attach.md):
/// the side that reads it logs this and closes the connection.
typealias LocalProtocolError = HearthError<LocalProtocolErrors>

/// The domain of ``LocalProtocolError``.
enum LocalProtocolErrors: HearthErrorDomain {}

extension ErrorCode where Domain == LocalProtocolErrors {
    /// A frame is not a local attach message, or breaks the protocol's rules.
    static var malformed: Self { Self("malformed") }
}

extension HearthError where Domain == LocalProtocolErrors {
    init(_ reason: String, file: String = #fileID, line: UInt = #line) {
        self.init(.malformed, reason, file: file, line: line)
    }
}
