import HearthIdentity

// Certificates that age: what the engine's owner sees of its ``CertificateRenewal``.
extension SyncEngine {
    /// This device's identity with its latest certificate (the one given at init, or a renewal).
    package var currentIdentity: DeviceIdentity { renewal.current }

    /// The account CA, while the owner has it unlocked on this device (the passphrase entered,
    /// e.g. `hearth daemon --unlock`): peers' certificate renewals are answered. Nil by default:
    /// the CA key is never stored in the clear.
    package var authority: AccountAuthority? {
        get { renewal.authority }
        set { renewal.unlock(newValue) { sessions } }
    }

    /// Called with the renewed identity each time this device's certificate is renewed (the
    /// owner saves it: ``AccountStore/replaceDeviceCertificate(_:of:)``).
    package var onCertificateRenewed: (@Sendable (DeviceIdentity) -> Void)? {
        get { renewal.onRenewed }
        set { renewal.onRenewed = newValue }
    }
}
