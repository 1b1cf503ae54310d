import Foundation

/// A failure the command reports as one line on stderr with a documented exit status.
package struct CommandError: Error, CustomStringConvertible {
    /// The documented exit statuses (also listed in `hearth --help`).
    package enum Status: Int32, CaseIterable {
        case general = 1
        case usage = 2
        case badBundle = 3
        case unknownStore = 4
        case invalidValue = 5
        case storeLocked = 6
        case notFound = 7
        case notSignedIn = 8
        case outcomeUnknown = 9
        case daemonRunning = 10
        case daemonNotRunning = 11
        case pairingRefused = 12
        case pairingTimedOut = 13

        package var meaning: String {
            switch self {
            case .general: "general failure"
            case .usage: "usage error (unknown option, missing argument)"
            case .badBundle: "wrong passphrase, or a damaged or refused join bundle"
            case .unknownStore: "unknown store (no file for it under the data directory)"
            case .invalidValue: "invalid value: bad JSON, not a property list, key over 64 bytes, quota exceeded"
            case .storeLocked: "the store is open in another process that takes no writes from hearth (an app); nothing was written"
            case .notFound: "no such key or account"
            case .notSignedIn: "not signed in to an account"
            case .outcomeUnknown: "outcome unknown: the write may or may not have been applied (its hearth process stopped answering)"
            case .daemonRunning: "a Hearth daemon already runs for this user (hearth daemon)"
            case .daemonNotRunning: "no Hearth daemon runs for this user (hearth daemon status)"
            case .pairingRefused: "pairing refused or failed (the codes differ, a device refused, a grant did not check out); nothing was admitted"
            case .pairingTimedOut: "pairing timed out: no member approved, or no request was found, in time; nothing was admitted"
            }
        }
    }

    package let status: Status
    package let message: String

    package init(_ status: Status, _ message: String) {
        self.status = status
        self.message = message
    }

    package var description: String { message }

    /// The exit-status table for `--help`.
    package static var helpTable: String {
        "EXIT STATUS\n  0  success\n" + Status.allCases.map { "  \($0.rawValue)  \($0.meaning)" }.joined(separator: "\n")
    }
}
