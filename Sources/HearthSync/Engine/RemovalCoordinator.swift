import Foundation
import HearthCore
import HearthIdentity
import HearthTransport

/// Device removals as one engine honours them: learned from peers (a `removals` message), from
/// this process (the owner's `DeviceRemovals.merge`) or from the file (another process); each
/// session then does what ``Routing/onRemovals(_:peer:us:)`` says. The engine owns one.
final class RemovalCoordinator: Sendable {
    let removals: DeviceRemovals
    /// This device.
    private let device: DeviceID
    private let context: EngineContext
    /// The engine's sessions now.
    private let sessions: @Sendable () -> [SyncSession]
    /// The engine's stores now.
    private let stores: @Sendable () -> [SyncStore]
    /// The peers that said this device was removed (each logged once).
    private let noticesFrom = Locked(Set<DeviceID>())
    /// Its observer of ``removals`` (nil once stopped).
    private let observer = Locked<UInt64?>(nil)

    /// Observes `removals` from now until ``stop()``: what is added reaches ``removalsAdded(_:)``.
    init(removals: DeviceRemovals, context: EngineContext, stores: @escaping @Sendable () -> [SyncStore] = { [] },
         sessions: @escaping @Sendable () -> [SyncSession]) {
        self.removals = removals
        device = context.identity.deviceID
        self.context = context
        self.stores = stores
        self.sessions = sessions
        let token = removals.observe { [weak self] added in self?.removalsAdded(added) }
        observer.withLock { $0 = token }
    }

    /// Stops observing the removals (the engine stopped; `removals` may outlive it).
    func stop() {
        if let token = observer.withLock({ o in defer { o = nil }; return o }) { removals.removeObserver(token) }
    }

    deinit { stop() }

    /// Merges records a peer sent (each verified against the account CA, once:
    /// ``DeviceRemovals/mergeFromPeer(_:)``); what is new reaches ``removalsAdded(_:)`` through
    /// the observer. A forged record is logged once per peer a minute: a peer may send it
    /// without end.
    func learn(_ records: [DeviceRemoval], from session: SyncSession) {
        let (added, forged) = removals.mergeFromPeer(records)
        if let forged {
            context.limitedLog.log(.warning, "ignoring a device removal from the peer that does not verify (\(forged.record)): \(forged.why); and the rest of its message",
                                   kind: "forged removal", peer: "\(session.peer.deviceID)", to: session.logger)
        }
        if !added.isEmpty {
            session.logger.info("learned \(added.count) device removal\(added.count == 1 ? "" : "s") from the peer")
        }
        // A record naming us (the peer relayed it before closing, or we held it already).
        if let ours = records.first(where: { $0.device == device }), removals.isRemoved(device) {
            noteRemoved(by: session.peer, record: removals.removal(of: device) ?? ours)
        }
    }

    /// Closes the connections of removed devices and tells every other peer.
    func removalsAdded(_ added: [DeviceRemoval]) {
        let removed = Set(added.map(\.device))
        // Their diallers stop once the session ends (cancelling one now would cut the session
        // before the peer is told why).
        let sessions = sessions()
        let selfRemoved = removed.contains(device)
        for session in sessions {
            switch Routing<SyncSession>.onRemovals(removed, peer: session.peer.deviceID, us: device) {
            case .expel:
                context.logger.notice("closing the connection to \(session.peer), removed from the account")
                // It is told why (the signed record) before the connection closes.
                session.expel()
            case .close: session.close()
            case .relay: session.relayRemovals()
            }
        }
        // Writes of a removed device that this device took before it heard of the removal: they
        // go, and every peer is asked for its whole store, which holds what they had replaced,
        // and given ours, which holds what they replaced here (``SyncStore/askEveryPeerForWhole()``).
        for store in stores() where store.dropRemovedWrites(added) {
            store.askEveryPeerForWhole()
        }
        if selfRemoved {
            context.logger.error("this device was removed from the account; its stores keep working here, and no peer will sync with it")
        }
    }

    /// A peer refused this device's certificate with a bare `certificate_revoked` alert: no
    /// signed record came with it, so nothing is marked (a member could say it of anyone). Logged
    /// once per peer a minute; the dialler tries again after its back-off.
    func noteRefusedAsRevoked(by peer: TLSPeer?, name: String? = nil) {
        let who = peer.map { "\($0.certificate.commonName ?? "?") (\($0.deviceID.short))" } ?? name ?? "a peer"
        context.limitedLog.log(.warning, "\(who) refused this device's certificate as revoked, without the signed removal record; taken as a refused connection, not as a removal (logged once a minute)",
                               kind: "revoked alert", peer: peer.map { $0.deviceID.hex } ?? name ?? "?", to: context.logger)
    }

    /// Records that `peer` sent the account-signed record of this device's removal (logged
    /// once per peer and process).
    func noteRemoved(by peer: TLSPeer, record: DeviceRemoval) {
        let notice = RemovalNotice(peer: peer.deviceID, peerName: peer.certificate.commonName ?? "", date: context.clock.date, record: record)
        let first = noticesFrom.withLock { $0.insert(peer.deviceID).inserted }
        removals.note(notice)
        guard first else { return }
        context.logger.error("\(notice)")
    }
}
