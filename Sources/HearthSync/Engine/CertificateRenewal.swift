import Foundation
import HearthCore
import HearthIdentity
import HearthTransport
import Logging

/// Certificates that age, for one engine: this device asks its peers for a renewed certificate
/// once its own is within ``SyncEngine/Options/renewalWindow`` of expiry; a peer holding the
/// unlocked account CA (``SyncEngine/authority``) issues one for the same key. Nobody does
/// anything by hand on the renewing device; its peers accept the new certificate because it
/// chains to the same CA. The engine owns one and forwards to it.
final class CertificateRenewal: Sendable {
    private struct State {
        /// This device's identity with its latest certificate (renewed while running).
        var current: DeviceIdentity
        /// The account CA, when the owner unlocked it here: peers' renewals are answered.
        var authority: AccountAuthority?
        var onRenewed: (@Sendable (DeviceIdentity) -> Void)?
    }

    private let state: Locked<State>
    /// The identity the engine started with (its key and account never change).
    private let identity: DeviceIdentity
    private let context: SyncEngine.Context
    /// Presents a renewed certificate from the next connection on.
    private let network: any PeerNetwork
    private let certificates: DeviceCertificateCache

    init(identity: DeviceIdentity, context: SyncEngine.Context, network: any PeerNetwork, certificates: DeviceCertificateCache) {
        state = Locked(State(current: identity))
        self.identity = identity
        self.context = context
        self.network = network
        self.certificates = certificates
    }

    /// This device's identity with its latest certificate (the one given at init, or a renewal).
    var current: DeviceIdentity { state.withLock { $0.current } }

    var authority: AccountAuthority? { state.withLock { $0.authority } }

    /// Keeps (or forgets) the unlocked CA; peers that asked before it was unlocked are answered now.
    func unlock(_ authority: AccountAuthority?, sessions: () -> [SyncSession]) {
        if let authority { precondition(authority.account.id == identity.account.id, "the authority is another account's") }
        state.withLock { $0.authority = authority }
        guard authority != nil else { return }
        // Each on its own loop, where its state is.
        for session in sessions() { session.answerRenewalIfAsked() }
    }

    var onRenewed: (@Sendable (DeviceIdentity) -> Void)? {
        get { state.withLock { $0.onRenewed } }
        set { state.withLock { $0.onRenewed = newValue } }
    }

    /// Whether `certificate` expires within the renewal window.
    func isDue(_ certificate: Certificate, now: Date? = nil) -> Bool {
        certificate.notValidAfter.timeIntervalSince(now ?? context.clock.date) < Double(context.options.renewalWindow.components.seconds)
    }

    /// Whether this device's certificate is within its renewal window.
    var isDue: Bool { isDue(current.certificate) }

    /// A peer asked for a renewal: answered now if the CA is unlocked here, else when it is.
    /// On the session's loop (it notes the request in its state).
    func asked(by session: isolated SyncSession) {
        session.state.renewal.askedByPeer = true
        if authority != nil {
            issue(to: session)
        } else {
            session.logger.debug("the peer asked for a certificate renewal; the account CA is locked here, so it is answered once unlocked")
        }
    }

    /// Issues the session's peer a certificate for its own key, once per connection, if its
    /// certificate is within the renewal window (a peer cannot extend its certificate at will).
    /// On the session's loop.
    func issue(to session: isolated SyncSession) {
        guard let authority else { return }
        let certificate = session.peer.certificate
        guard isDue(certificate), let key = certificate.publicKey else {
            session.logger.debug("the peer asked for a certificate renewal it is not due")
            return
        }
        guard !session.state.renewal.issued else { return }
        session.state.renewal.issued = true
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
        let current = current
        do {
            let certificate = try Certificate(derEncoded: der)
            try identity.account.trust.validateDevice(certificate, at: context.clock.date)
            guard certificate.notValidAfter > current.certificate.notValidAfter else {
                session.logger.debug("a renewed certificate that does not last longer than ours; ignored")
                return
            }
            let renewed = try DeviceIdentity(account: identity.account, privateKey: identity.privateKey, certificate: certificate,
                                             signatures: identity.signatures)
            try network.replaceIdentity(renewed)
            _ = try? certificates.admit(certificate)
            let handler = state.withLock { s -> (@Sendable (DeviceIdentity) -> Void)? in
                s.current = renewed
                return s.onRenewed
            }
            context.logger.notice("this device's certificate was renewed by \(session.peer); valid until \(certificate.notValidAfter)")
            handler?(renewed)
        } catch {
            session.logger.warning("ignoring a renewed certificate from the peer: \(error)")
        }
    }
}
