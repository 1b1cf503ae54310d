/// Why a pairing did not admit a device.
///
/// Whatever the code, nothing was admitted: the member issued no certificate that reached the
/// newcomer's disk (a member's certificate is issued only after its person confirmed the code and
/// its passphrase opened the account key, and a newcomer stores one only after its own person
/// confirmed and the grant checked out).
package struct PairingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure. Extensible: compare against the static members.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        package let name: String
        package init(_ name: String) { self.name = name }
        package var description: String { name }

        /// This device refused: its person said the codes differ (or did not confirm), or the
        /// account passphrase given here did not open the account key.
        package static let refused = Code("refused")
        /// The other device refused, and said why (``PairingError/message``).
        package static let refusedByPeer = Code("refusedByPeer")
        /// The newcomer is pairing with another member already.
        package static let busy = Code("busy")
        /// A frame that is not a pairing message, a field out of bounds, or a message out of turn.
        package static let malformed = Code("malformed")
        /// The member's nonce does not open the commitment it sent first.
        package static let commitmentMismatch = Code("commitmentMismatch")
        /// The grant does not check out: the CA, the member's certificate or the granted one.
        package static let invalidGrant = Code("invalidGrant")
        /// The device reached is not the one announced (its key's hash differs from the TXT record's).
        package static let unexpectedPeer = Code("unexpectedPeer")
        /// Nothing happened in time.
        package static let timedOut = Code("timedOut")
        /// The connection ended before the pairing did.
        package static let connectionLost = Code("connectionLost")
    }

    package var code: Code
    /// What happened, in words.
    package var message: String

    package init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "\(code): \(message)" }

    static func malformed(_ message: String) -> PairingError { PairingError(code: .malformed, message: message) }
}
