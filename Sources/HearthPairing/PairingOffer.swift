import Foundation
import HearthIdentity

/// What a device shows its person once the code is known: the code, and who is at the other
/// end by its own account (its certificate).
package struct PairingOffer: Sendable, CustomStringConvertible {
    /// The code; the person compares it with the other device's screen.
    package let code: PairingCode
    /// The other device's name, from the certificate it presented: its own claim.
    package let deviceName: String
    /// SHA-256 of the other device's key (its device ID in the account once admitted).
    package let deviceID: DeviceID
    /// On the newcomer: the account the member's certificate names as its issuer, a claim
    /// until the grant's CA is checked against that certificate (before anything is stored).
    /// Nil on the member.
    package let accountName: String?
    /// Where the other device connected from or was reached at.
    package let address: String?

    package init(code: PairingCode, deviceName: String, deviceID: DeviceID, accountName: String?, address: String?) {
        self.code = code
        self.deviceName = deviceName
        self.deviceID = deviceID
        self.accountName = accountName
        self.address = address
    }

    package var description: String {
        "\(deviceName) (\(deviceID.short))\(accountName.map { " of \($0)" } ?? ""): code \(code)"
    }
}

/// A person's answer to a ``PairingOffer``.
package enum PairingDecision: Sendable, Hashable {
    /// The codes match: go on.
    case approve
    /// Stop, telling the other device why (e.g. "the codes differ").
    case refuse(String)

    /// The decision a typed answer makes: "y" or "yes", or six digits equal to `code`, approve;
    /// anything else (other digits, nothing, end of input) refuses. What `hearth` reads from its
    /// person or from a script's standard input.
    package static func typed(_ answer: String?, for code: PairingCode) -> PairingDecision {
        guard let answer = answer?.trimmingCharacters(in: .whitespacesAndNewlines), !answer.isEmpty else {
            return .refuse("no confirmation was given")
        }
        if ["y", "yes"].contains(answer.lowercased()) { return .approve }
        if let typed = PairingCode(typed: answer) {
            return typed == code ? .approve : .refuse("the codes differ")
        }
        return .refuse("refused by its person")
    }
}
