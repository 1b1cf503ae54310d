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
        /// Only an ack is owed (it may be held: ``SessionMailbox/holdsAcks``).
        var ackOnly: Bool { !state && !left && refused.isEmpty && !delta && ack != nil }
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

    /// Whether an ack waits for other mail (or ``acksDue``) instead of going out alone: set by
    /// every `SyncSession` (tests of the protocol's order leave it off). An ack only tells the peer what it already assumes (it counts
    /// what it sent as ours), for settling and tombstone collection, so it can wait a few
    /// milliseconds; alone it costs both devices a TLS record, a write, a read and a wake-up per
    /// delta, about a tenth of the CPU of a write through the daemons.
    package var holdsAcks = false
    /// Held acks go out now (the session's ack delay passed).
    package var acksDue = false
    /// Whether the session's ack timer runs (``heldAcksNeedTimer()``).
    package var ackTimerArmed = false
    /// A frame goes out with the writer's next flush (the writer says so, ``frameSent()``):
    /// held acks travel with it, in the same TLS record. Reset once the mailbox is empty.
    private var piggyback = false

    /// The writer queued a frame for the peer: held acks may go with it.
    package mutating func frameSent() { piggyback = true }

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
        guard let item = nextItem() else {
            piggyback = false
            if !hasHeldAcks { acksDue = false }
            return nil
        }
        return item
    }

    /// Whether an ack is owed that ``next()`` holds back now.
    package var hasHeldAcks: Bool { stores.values.contains { $0.ack != nil } }

    /// Acks are held and none of them will go out without a timer: notes the timer as armed
    /// and returns true (the session then sets ``acksDue`` after its ack delay).
    package mutating func heldAcksNeedTimer() -> Bool {
        guard holdsAcks, !acksDue, !ackTimerArmed, hasHeldAcks else { return false }
        ackTimerArmed = true
        return true
    }

    /// The ack timer fired: what is held goes out.
    package mutating func ackTimerFired() {
        ackTimerArmed = false
        acksDue = true
    }

    /// Whether ``next()`` has something to give now (held acks do not count).
    package var hasSendable: Bool {
        hello || removals || certificate != nil || renew || links || ping || pong
            || stores.values.contains { !$0.isEmpty && !$0.ackOnly }
            || (hasHeldAcks && (!holdsAcks || acksDue || piggyback))
    }

    private mutating func nextItem() -> SessionOutgoing? {
        if hello { hello = false; return .hello }
        // A removal goes before any data: the peer should stop trusting the device at once.
        if removals { removals = false; return .removals }
        if let der = certificate { certificate = nil; return .certificate(der) }
        if renew { renew = false; return .renew }
        // Before any delta: the peer relays direct first as soon as it knows our links.
        if links { links = false; return .links }
        let acksGo = !holdsAcks || acksDue || piggyback
        // A store with only an ack to send waits while acks are held; another's mail goes first.
        if let (store, mail) = acksGo ? stores.first : stores.first(where: { !$0.value.ackOnly }) {
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
            } else if let vector = mail.ack, acksGo {
                rest.ack = nil
                item = .ack(.init(store: store, vector: vector))
            } else {
                stores[store] = nil
                return nextItem()
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
