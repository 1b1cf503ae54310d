import Foundation

/// Why a replica file could not be opened, read or written.
package struct PersistenceError: Error, Hashable, Sendable, CustomStringConvertible {
    package enum Code: String, Sendable {
        /// Another process has the store open.
        case locked
        /// A system call failed (the reason carries `strerror`).
        case io
        /// The file is not a replica file Hearth can read.
        case damaged
        /// The replica holds something the file format cannot hold (never expected: every
        /// value is checked against ``StoreLimits`` before it is stored).
        case unencodable
    }

    package let code: Code
    package let path: String
    package let reason: String

    package init(_ code: Code, path: String, reason: String) {
        self.code = code
        self.path = path
        self.reason = reason
    }

    package var description: String {
        switch code {
        case .locked: return "store file \(path) is in use by another process (\(reason))"
        case .io: return "cannot access \(path): \(reason)"
        case .damaged: return "store file \(path) is damaged: \(reason)"
        case .unencodable: return "cannot write \(path): \(reason)"
        }
    }

    static func io(_ operation: String, path: String, errno code: Int32 = errno) -> PersistenceError {
        PersistenceError(.io, path: path, reason: "\(operation): \(String(cString: strerror(code)))")
    }
}
