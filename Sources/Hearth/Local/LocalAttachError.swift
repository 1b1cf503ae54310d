import HearthCore

/// Why this process can neither host a store for others nor attach to the one that hosts it
/// (an unsafe socket folder, a host that refused the hello or never answered).
typealias LocalAttachError = HearthError<LocalAttachErrors>

/// The domain of ``LocalAttachError``.
enum LocalAttachErrors: HearthErrorDomain {}

extension ErrorCode where Domain == LocalAttachErrors {
    /// The store could not be hosted for, or attached to, another process.
    static var unavailable: Self { Self("unavailable") }
    /// A host took the connection but did not serve it (closed it, or sent no snapshot in
    /// time): its socket and lock stay as they were, so no event will say when to try again.
    static var notServed: Self { Self("notServed") }
}

extension HearthError where Domain == LocalAttachErrors {
    init(_ reason: String, file: String = #fileID, line: UInt = #line) {
        self.init(.unavailable, reason, file: file, line: line)
    }
}
