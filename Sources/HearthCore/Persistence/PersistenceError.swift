import Foundation

/// Why a replica file could not be opened, read or written.
package typealias PersistenceError = HearthError<PersistenceErrors>

/// The domain of ``PersistenceError``.
package enum PersistenceErrors: HearthErrorDomain {}

extension ErrorCode where Domain == PersistenceErrors {
    /// Another process has the store open.
    package static var locked: Self { Self("locked") }
    /// A system call failed (the reason carries `strerror`).
    package static var io: Self { Self("io") }
    /// The file is not a replica file Hearth can read.
    package static var damaged: Self { Self("damaged") }
    /// The replica holds something the file format cannot hold (never expected: every
    /// value is checked against ``StoreLimits`` before it is stored).
    package static var unencodable: Self { Self("unencodable") }
}

extension HearthError where Domain == PersistenceErrors {
    /// An error of `code` about the file at `path`, its reason worded for the code.
    package init(_ code: Code, path: String, reason: String, underlying: (any Error & Sendable)? = nil,
                 file: String = #fileID, line: UInt = #line) {
        let text = switch code {
        case .locked: "store file \(path) is in use by another process (\(reason))"
        case .damaged: "store file \(path) is damaged: \(reason)"
        case .unencodable: "cannot write \(path): \(reason)"
        default: "cannot access \(path): \(reason)"
        }
        self.init(code, text, underlying: underlying, file: file, line: line)
    }

    static func io(_ operation: String, path: String, errno code: Int32 = errno,
                   file: String = #fileID, line: UInt = #line) -> Self {
        Self(.io, path: path, reason: "\(operation): \(String(cString: strerror(code)))", file: file, line: line)
    }
}
