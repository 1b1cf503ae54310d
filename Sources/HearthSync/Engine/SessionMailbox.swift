import Foundation
import HearthCore

/// What a session's writer owes the peer. Coalesced, not queued: a peer that stops reading
/// while this device keeps changing costs a few flags and one vector per store, never a
/// growing queue (what the peer lacks is computed when the writer gets to it, as one delta).
/// It holds mail only for stores this device serves, so its size is bounded by them.
package struct SessionMailbox: Sendable {
    /// What is owed about one store.
    package struct StoreMail: Sendable {
        /// Our vector of the store (the hellos' digests differed, or it was attached since).
        package var state = false
        /// With the devices we know of in the store (the hellos' peers digests differed).
        package var peers = false
        /// We no longer serve the store.
        package var left = false
        /// Entries of the peer's deltas that were not applied, for a `refused` message.
        package var refused: [RefusedEntry] = []
        package var refusedClock: UInt64 = 0
        /// Send what the peer lacks, if anything.
        package var delta = false
        /// Our vector after applying the peer's delta (the latest replaces an unsent one).
        package var ack: VersionVector?

        package var isEmpty: Bool { !state && !left && refused.isEmpty && !delta && ack == nil }
    }

    /// Our hello, first on every connection.
    package var hello = false
    /// Every device removal we know (the hellos' removals digests differed, or we learned one).
    package var removals = false
    /// Ask for a renewed certificate (ours is within its renewal window).
    package var renew = false
    /// A certificate issued for the peer (it asked, and we hold the account CA).
    package var certificate: Data?
    /// The devices we have a session with (sent after the hello, and when they change).
    package var links = false
    package var ping = false
    package var pong = false
    package var stores: [String: StoreMail] = [:]

    package var isEmpty: Bool { !hello && !removals && !renew && certificate == nil && !links && !ping && !pong && stores.isEmpty }

    /// Changes what is owed about `store`.
    package mutating func post(_ store: String, _ change: (inout StoreMail) -> Void) {
        var mail = stores[store] ?? StoreMail()
        change(&mail)
        stores[store] = mail.isEmpty ? nil : mail
    }

    /// The next thing to send, in the order the protocol wants (the hello first; for a store,
    /// its state before its delta, a refusal before the ack of the same delta), taken out of
    /// the mailbox.
    package mutating func next() -> SessionOutgoing? {
        if hello { hello = false; return .hello }
        // A removal goes before any data: the peer should stop trusting the device at once.
        if removals { removals = false; return .removals }
        if let der = certificate { certificate = nil; return .certificate(der) }
        if renew { renew = false; return .renew }
        // Before any delta: the peer relays direct first as soon as it knows our links.
        if links { links = false; return .links }
        if let (store, mail) = stores.first {
            var rest = mail
            let item: SessionOutgoing
            if mail.left {
                // What was posted since (the store attached again: its state) goes after.
                rest.left = false
                item = .left(store)
            } else if mail.state {
                rest.state = false
                rest.peers = false
                item = .state(store, peers: mail.peers)
            } else if !mail.refused.isEmpty {
                rest.refused = []
                item = .refused(.init(store: store, entries: mail.refused, clock: mail.refusedClock))
            } else if mail.delta {
                rest.delta = false
                item = .delta(store)
            } else if let vector = mail.ack {
                rest.ack = nil
                item = .ack(.init(store: store, vector: vector))
            } else {
                stores[store] = nil
                return next()
            }
            stores[store] = rest.isEmpty ? nil : rest
            return item
        }
        if ping { ping = false; return .ping }
        if pong { pong = false; return .pong }
        return nil
    }
}

/// One item a session's writer sends (see ``SessionMailbox/next()``).
package enum SessionOutgoing: Sendable, Equatable {
    case hello, removals, renew, links, ping, pong
    case certificate(Data)
    case state(String, peers: Bool)
    case left(String)
    case delta(String)
    case ack(SyncMessage.Ack)
    case refused(SyncMessage.Refusal)
}
