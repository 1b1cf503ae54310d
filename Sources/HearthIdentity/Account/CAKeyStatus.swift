/// How this device holds an account's CA private key (the key that admits and removes
/// devices), as ``AccountStore/caKeyStatus(_:)`` finds it in the account's `ca.key`.
package enum CAKeyStatus: Hashable, Sendable, CustomStringConvertible {
    /// Encrypted under the account passphrase (PKCS#8, PBES2 with scrypt at these parameters
    /// and AES-256-CBC): the device's files alone cannot admit a device.
    case protected(ScryptParameters)
    /// Stored unencrypted, as Hearth stored it before it sealed the key under the account
    /// passphrase: anyone who copies the device's files can admit devices.
    /// ``AccountStore/protectAuthority(_:passphrase:)`` encrypts it.
    case clear
    /// Not on this device: it can sync but not admit or remove devices.
    case absent

    package var description: String {
        switch self {
        case .protected(let parameters): "encrypted under the account passphrase (scrypt \(parameters))"
        case .clear: "stored unencrypted"
        case .absent: "not on this device"
        }
    }
}
