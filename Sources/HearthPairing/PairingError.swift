import HearthCore

/// Why a pairing did not admit a device.
///
/// Whatever the code, nothing was admitted: the member issued no certificate that reached the
/// newcomer's disk (a member's certificate is issued only after its person confirmed the code and
/// its passphrase opened the account key, and a newcomer stores one only after its own person
/// confirmed and the grant checked out).
package typealias PairingError = HearthError<PairingErrors>

/// The domain of ``PairingError``.
package enum PairingErrors: HearthErrorDomain {
    package static func describe(code: ErrorCode<PairingErrors>, reason: String) -> String { "\(code): \(reason)" }
}

extension ErrorCode where Domain == PairingErrors {
    /// This device refused: its person said the codes differ (or did not confirm), or the
    /// account passphrase given here did not open the account key.
    package static var refused: Self { Self("refused") }
    /// The other device refused, and said why (the error's reason).
    package static var refusedByPeer: Self { Self("refusedByPeer") }
    /// The newcomer is pairing with another member already.
    package static var busy: Self { Self("busy") }
    /// A frame that is not a pairing message, a field out of bounds, or a message out of turn.
    package static var malformed: Self { Self("malformed") }
    /// The member's nonce does not open the commitment it sent first.
    package static var commitmentMismatch: Self { Self("commitmentMismatch") }
    /// The grant does not check out: the CA, the member's certificate or the granted one.
    package static var invalidGrant: Self { Self("invalidGrant") }
    /// The device reached is not the one announced (its key's hash differs from the TXT record's).
    package static var unexpectedPeer: Self { Self("unexpectedPeer") }
    /// Nothing happened in time.
    package static var timedOut: Self { Self("timedOut") }
    /// The connection ended before the pairing did.
    package static var connectionLost: Self { Self("connectionLost") }
}

extension HearthError where Domain == PairingErrors {
    /// An error of `code`, `message` saying what happened.
    package init(code: Code, message: String, file: String = #fileID, line: UInt = #line) {
        self.init(code, message, file: file, line: line)
    }

    /// What happened, in words (the ``HearthError/reason``).
    package var message: String { reason }

    static func malformed(_ message: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(code: .malformed, message: message, file: file, line: line)
    }
}
