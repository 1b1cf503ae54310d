import Foundation
import HearthCore
import HearthIdentity

// Certificates that age: a device asks its peers for a renewed certificate once its own is
// within ``SyncEngine/Options/renewalWindow`` of expiry; a peer holding the unlocked account CA
// (``SyncEngine/authority``) issues one for the same key. Nobody does anything by hand on the
// renewing device; its peers accept the new certificate because it chains to the same CA.
extension SyncEngine {
    /// This device's identity with its latest certificate (the one given at init, or a renewal).
    package var currentIdentity: DeviceIdentity { state.withLock { $0.currentIdentity } }

    /// The account CA, while the owner has it unlocked on this device (the passphrase entered,
    /// e.g. `hearth daemon --unlock`): peers' certificate renewals are answered. Nil by default:
    /// the CA key is never stored in the clear.
    package var authority: AccountAuthority? {
        get { state.withLock { $0.authority } }
        set {
            if let newValue { precondition(newValue.account.id == identity.account.id, "the authority is another account's") }
            let sessions = state.withLock { s in
                s.authority = newValue
                return s.sessions.sessions
            }
            // Peers that asked before the CA was unlocked are answered now.
            if newValue != nil { for session in sessions where session.state.withLock({ $0.renewal.askedByPeer }) { issueRenewal(to: session) } }
        }
    }

    /// Called with the renewed identity each time this device's certificate is renewed (the
    /// owner saves it: ``AccountStore/replaceDeviceCertificate(_:of:)``).
    package var onCertificateRenewed: (@Sendable (DeviceIdentity) -> Void)? {
        get { state.withLock { $0.onCertificateRenewed } }
        set { state.withLock { $0.onCertificateRenewed = newValue } }
    }

    /// Whether `certificate` expires within the renewal window.
    func isDue(_ certificate: Certificate, now: Date? = nil) -> Bool {
        certificate.notValidAfter.timeIntervalSince(now ?? context.clock.date) < Double(options.renewalWindow.components.seconds)
    }

    /// Whether this device's certificate is within its renewal window.
    var certificateIsDue: Bool { isDue(currentIdentity.certificate) }

    /// A peer asked for a renewal: answered now if the CA is unlocked here, else when it is.
    func renewalAsked(by session: SyncSession) {
        session.state.withLock { $0.renewal.askedByPeer = true }
        if authority != nil {
            issueRenewal(to: session)
        } else {
            session.logger.debug("the peer asked for a certificate renewal; the account CA is locked here, so it is answered once unlocked")
        }
    }

    /// Issues the session's peer a certificate for its own key, once per connection, if its
    /// certificate is within the renewal window (a peer cannot extend its certificate at will).
    func issueRenewal(to session: SyncSession) {
        guard let authority else { return }
        let certificate = session.peer.certificate
        guard isDue(certificate), let key = certificate.publicKey else {
            session.logger.debug("the peer asked for a certificate renewal it is not due")
            return
        }
        guard session.state.withLock({ s in defer { s.renewal.issued = true }; return !s.renewal.issued }) else { return }
        do {
            let renewed = try authority.issueDeviceCertificate(for: key, deviceName: certificate.commonName ?? "")
            session.logger.info("renewed the peer's certificate, valid until \(renewed.notValidAfter)")
            session.post { $0.certificate = Data(renewed.derEncoded) }
        } catch {
            session.logger.error("could not renew the peer's certificate: \(error)")
        }
    }

    /// A peer sent a renewed certificate: used from the next connection on if it is for our key,
    /// chains to the account CA and lasts longer than the one we have.
    func renewed(_ der: Data, from session: SyncSession) {
        let current = currentIdentity
        do {
            let certificate = try Certificate(derEncoded: der)
            try identity.account.trust.validateDevice(certificate, at: context.clock.date)
            guard certificate.notValidAfter > current.certificate.notValidAfter else {
                session.logger.debug("a renewed certificate that does not last longer than ours; ignored")
                return
            }
            let renewed = try DeviceIdentity(account: identity.account, privateKey: identity.privateKey, certificate: certificate)
            try network.replaceIdentity(renewed)
            _ = try? certificates.admit(certificate)
            let handler = state.withLock { s -> (@Sendable (DeviceIdentity) -> Void)? in
                s.currentIdentity = renewed
                return s.onCertificateRenewed
            }
            logger.notice("this device's certificate was renewed by \(session.peer); valid until \(certificate.notValidAfter)")
            handler?(renewed)
        } catch {
            session.logger.warning("ignoring a renewed certificate from the peer: \(error)")
        }
    }
}
