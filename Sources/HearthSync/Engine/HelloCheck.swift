import Foundation
import HearthCore
import HearthIdentity

/// The checks on what a peer sends before its hello is accepted (docs/protocol.md, "Hello"): a
/// value, so that every rule is tested without a link (`SessionHelloTests`). The session's shell
/// reads frames, asks this what each means, and closes with the error it throws.
package struct HelloCheck: Sendable {
    /// What a first message, once checked, asks of the shell.
    package enum Verdict: Sendable, Equatable {
        /// The peer's hello, of our protocol and account: register the session and greet.
        case hello(SyncMessage.Hello)
        /// The peer refuses this device as removed: it sent the signed records instead of a hello.
        /// Merge them; only a record that names this device (``removedByPeer(namingUs:)``) ends it so.
        case removals([DeviceRemoval])
    }

    /// Our account's ID (32 bytes), which the peer's hello must name.
    package let account: Data

    package init(account: Data) { self.account = account }

    /// Until the peer has proved who it is, only a small frame is even decoded.
    package static func admitFrame(of bytes: Int) throws(SyncProtocolError) {
        guard bytes <= SyncMessage.maximumHelloSize else {
            throw SyncProtocolError("a first frame of \(bytes) bytes, more than a hello may take (\(SyncMessage.maximumHelloSize))")
        }
    }

    /// What the peer's first message means: a hello of our protocol and account, or the removal
    /// records a member sends a device it refuses as removed; anything else ends the connection.
    package func check(_ message: SyncMessage) throws(SyncProtocolError) -> Verdict {
        // A member refusing us as removed sends the signed record instead of a hello
        // (TLSConfiguration.removalNotice).
        if case .removals(let records) = message { return .removals(records) }
        guard case .hello(let hello) = message else {
            throw SyncProtocolError("the first message was not a hello")
        }
        guard hello.protocolVersion == SyncMessage.protocolVersion else {
            throw SyncProtocolError("peer speaks protocol \(hello.protocolVersion), we speak \(SyncMessage.protocolVersion); no data exchanged")
        }
        // TLS accepted only a certificate of our account's CA; a hello naming another account is a
        // device that is confused (or lying), and nothing is exchanged with it.
        guard hello.account == account else {
            throw SyncProtocolError("peer is of account \(Hex.encode(hello.account.prefix(4))), we are \(Hex.encode(account.prefix(4))); no data exchanged")
        }
        return .hello(hello)
    }

    /// After merging the records a peer sent instead of its hello: only records that now mark
    /// this device removed end the session as removed by the peer; others are a protocol error.
    package static func removedByPeer(namingUs: Bool) throws(SyncProtocolError) {
        guard namingUs else {
            throw SyncProtocolError("a removals message instead of the hello, not naming this device")
        }
    }
}
