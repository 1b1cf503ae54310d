import Foundation
import HearthCore
import HearthIdentity
import HearthTransport

/// That a peer of the account says this device was removed from it.
public struct RemovalNotice: Sendable, Hashable, CustomStringConvertible {
    /// The device that said so (its certificate verified in the handshake).
    public let peer: DeviceID
    /// Its name, from its certificate.
    public let peerName: String
    public let date: Date
    /// The CA-signed record, when a peer sent it; nil when a peer only refused our certificate
    /// as revoked (a TLS alert).
    public let record: DeviceRemoval?

    public var description: String {
        "this device was removed from the account (\(record.map { "signed removal of \($0.date)" } ?? "its certificate refused as revoked") by \(peerName) (\(peer.short)))"
    }
}

// Device removals: learned from peers (a `removals` message), from this process (the owner's
// `DeviceRemovals.merge`) or from the file (another process); honoured at once.
extension SyncEngine {
    /// What a peer says of this device's standing, if it says it was removed. The store keeps
    /// working locally; peers no longer sync with it.
    public var removalNotice: RemovalNotice? { state.withLock { $0.removalNotice } }

    /// Merges records a peer sent (each verified against the account CA); what is new reaches
    /// ``removalsAdded(_:)`` through the observer.
    func learn(_ records: [DeviceRemoval], from session: SyncSession) {
        let added = removals.merge(records)
        if !added.isEmpty {
            session.logger.info("learned \(added.count) device removal\(added.count == 1 ? "" : "s") from the peer")
        }
        // A record naming us (the peer relayed it before closing, or we held it already).
        if let ours = records.first(where: { $0.device == identity.deviceID }), removals.isRemoved(identity.deviceID) {
            noteRemoved(by: session.peer, record: removals.removal(of: identity.deviceID) ?? ours)
        }
    }

    /// Closes the connections of removed devices and tells every other peer.
    func removalsAdded(_ added: [DeviceRemoval]) {
        let removed = Set(added.map(\.device))
        let sessions = state.withLock { s -> [SyncSession] in
            // Known by their certificate: not dialled again.
            for (id, device) in s.knownDevices where removed.contains(device) { s.dialers.removeValue(forKey: id)?.cancel() }
            return Array(s.sessions.values)
        }
        for session in sessions {
            if removed.contains(session.peer.deviceID) {
                logger.notice("closing the connection to \(session.peer), removed from the account")
                session.close()
            } else {
                session.relayRemovals()
            }
        }
        if removed.contains(identity.deviceID) {
            logger.error("this device was removed from the account; its stores keep working here, and no peer will sync with it")
        }
    }

    /// Records that `peer` says this device is removed (logged once per peer).
    func noteRemoved(by peer: TLSPeer, record: DeviceRemoval? = nil) {
        let notice = RemovalNotice(peer: peer.deviceID, peerName: peer.certificate.commonName ?? "", date: Date(), record: record)
        let first = state.withLock { s -> Bool in
            let first = s.removalNotice?.peer != peer.deviceID
            if s.removalNotice == nil || record != nil { s.removalNotice = notice }
            return first
        }
        if first { logger.error("\(notice); not dialling that peer again until restarted") }
    }
}
