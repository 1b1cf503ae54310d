#if canImport(Glibc)
import Glibc
#endif
import HearthCore
import Logging
import NIOCore
import NIOPosix

/// Connection failures whose cause is this machine, not the peer or the network: the process
/// may not do something (a socket option, a port) or has run out of descriptors or buffers.
///
/// Retrying cannot cure them and the peer never learns of them, so a dial loop's `debug` line
/// or a silently reset accept would hide them for good (issue 26: as a non-root user every
/// connection failed on a socket option and nothing said so at the default level).
package enum LocalFailure {
    /// The errno values that name a cause on this machine, with their names.
    static let causes: [CInt: String] = [
        EACCES: "EACCES", EPERM: "EPERM", EMFILE: "EMFILE", ENFILE: "ENFILE",
        ENOBUFS: "ENOBUFS", ENOMEM: "ENOMEM",
    ]

    /// The local cause of `error` as "EACCES (Permission denied)", or nil if the cause is not
    /// this machine (a refused or timed-out dial, a TLS refusal, a closed connection).
    package static func cause(of error: any Error) -> String? {
        switch error {
        case let error as IOError:
            guard let name = causes[error.errnoCode] else { return nil }
            return "\(name) (\(String(cString: strerror(error.errnoCode))))"
        case let error as NIOConnectionError:
            // A dial by host name: each address tried failed on its own.
            return error.connectionErrors.lazy.compactMap { cause(of: $0.error) }.first
        default:
            return nil
        }
    }
}

/// Logs a local failure (``LocalFailure``) at `error` once per cause and direction for the
/// life of its transport (one per sync engine), and counts every occurrence: a peer retried
/// with back-off every few seconds must not fill the log with the same line.
package final class LocalFailureLog: Sendable {
    private let seen = Locked<[String: Int]>([:])
    /// Signalled after each failure counted, so a test waits for a count (``occurrences(_:)``)
    /// on it rather than polling.
    package let changes = ChangeSignal()

    /// Reports `error` if its cause is local; returns whether it was.
    @discardableResult
    package func report(_ error: any Error, while doing: String, logger: Logger) -> Bool {
        guard let cause = LocalFailure.cause(of: error) else { return false }
        let key = "\(doing): \(cause)"
        let first = seen.withLock { counts -> Bool in
            counts[key, default: 0] += 1
            return counts[key] == 1
        }
        defer { changes.signal() }
        if first {
            logger.error("cannot \(doing) peer connections: \(cause), a cause on this machine (permissions or limits), not the peer; retrying will not help until it is fixed, and it is logged only this once",
                         metadata: ["error": "\(error)"])
        }
        return true
    }

    /// How many times a failure with `cause` (e.g. "accept: EACCES") was reported; for tests.
    package func occurrences(_ prefix: String) -> Int {
        seen.withLock { $0.filter { $0.key.hasPrefix(prefix) }.values.reduce(0, +) }
    }
}

/// On a listening channel: accept errors (EMFILE…) and accepted connections that could not be
/// set up (a socket option refused) arrive here as errors; local ones are reported.
final class LocalFailureReporter: ChannelInboundHandler, Sendable {
    typealias InboundIn = Any
    private let failures: LocalFailureLog
    private let logger: Logger

    init(_ failures: LocalFailureLog, logger: Logger) {
        self.failures = failures
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failures.report(error, while: "accept", logger: logger)
        context.fireErrorCaught(error)
    }
}
