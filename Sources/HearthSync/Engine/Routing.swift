import Foundation
import HearthCore
import HearthIdentity

/// What a session asks the engine to do for the other sessions after a message (returned by
/// ``SessionState/deltaApplied(_:_:)``); ``Routing/targets(of:from:)`` says which sessions it
/// goes to, and each session's own state decides what it means there.
package enum RelayEffect: Sendable, Equatable {
    /// Other peers may lack what this one brought: every session is to send what its peer lacks.
    case push(String)
    /// As ``push(_:)``, but the peer that brought it is left out: it has everything we have (its
    /// delta's vector covers ours after applying it), so its session would find nothing to send.
    case pushOthers(String)
    /// Entries of origins new to the store arrived: sessions note what their peer said it had
    /// of them before we knew them (``SessionState/claimsNowKnown(of:in:)``).
    case originsLearned(String)
    /// Entries of these writers (device prefixes) arrived: peers linked to a writer left its
    /// writes to it, so no ack of ours tells them we have them; they are told our vector soon
    /// (``SessionState/tellVectorSoon(of:ifLinkedTo:)``).
    case tellLinkedPeers(String, writers: Set<UInt64>)
}

/// The engine's sessions, one per peer device, as a value: who is admitted (the duplicate rule,
/// removed devices), whom an event goes to, what a removal does to each. The engine keeps it
/// under its lock and runs what it decides; `RelayRoutingTests` run it with no engine.
package struct Routing<Session: AnyObject & Sendable>: Sendable {
    private struct Route: Sendable {
        let session: Session
        /// The device that dialled the session's connection.
        let initiator: DeviceID
    }

    private var routes: [DeviceID: Route] = [:]

    package init() {}

    /// Whether a session was admitted (``admit(_:peer:initiator:removed:)``).
    package enum Admission: Sendable {
        /// Admitted, in place of the session it closes (if any).
        case accepted(replacing: Session?)
        /// Another connection to this peer is kept.
        case duplicate
        /// The peer, or this device, was removed from the account.
        case removed
    }

    /// What a removal learned means for one session (``onRemovals(_:peer:us:)``).
    package enum RemovalAction: Sendable, Equatable {
        /// The peer was removed: it is told why (the signed record), then the link closes.
        case expel
        /// This device was removed: no peer syncs with it any more.
        case close
        /// The peer is told of the removal.
        case relay
    }

    package subscript(device: DeviceID) -> Session? { routes[device]?.session }
    // Closures, not key paths (`map(\.session)`), here and below: a key path into this generic
    // type is instantiated at run time on every call (type metadata demangled), which cost the
    // daemon about 2.5 % of its CPU per write when every change asked for the sessions.
    package var sessions: [Session] { routes.values.map { $0.session } }
    package var devices: [DeviceID] { Array(routes.keys) }
    package var isEmpty: Bool { routes.isEmpty }

    /// Admits `session` with `peer` after its hello, or refuses it: a removed device (`removed`:
    /// the peer or this device is) gets nothing, and of two connections to one peer both ends
    /// keep the one dialled by the smaller device ID; between two dialled by the same device,
    /// the newer.
    package mutating func admit(_ session: Session, peer: DeviceID, initiator: DeviceID, removed: Bool) -> Admission {
        // An honest removed device keeps what it writes from now on to itself (peers that have
        // not heard yet would take it).
        guard !removed else { return .removed }
        let existing = routes[peer]
        if let existing, initiator > existing.initiator { return .duplicate }
        routes[peer] = Route(session: session, initiator: initiator)
        return .accepted(replacing: existing?.session)
    }

    /// Takes `session` out, if it is the one kept for `peer`; false if another was (it replaced
    /// this one) or none.
    package mutating func remove(_ session: Session, peer: DeviceID) -> Bool {
        guard routes[peer]?.session === session else { return false }
        routes[peer] = nil
        return true
    }

    /// Takes every session out (the engine stops).
    package mutating func removeAll() -> [Session] {
        defer { routes = [:] }
        return sessions
    }

    /// The devices with a session now, except `device`, sorted: what a `links` message tells it.
    package func linked(except device: DeviceID) -> [DeviceID] {
        routes.keys.filter { $0 != device }.sorted()
    }

    /// The sessions an effect from `sender`'s session goes to: a push to every one (the
    /// sender's finds nothing it lacks), the rest to the others.
    package func targets(of effect: RelayEffect, from sender: DeviceID) -> [Session] {
        switch effect {
        case .push: return sessions
        case .pushOthers: return sessions(except: sender)
        case .originsLearned: return sessions
        case .tellLinkedPeers: return routes.compactMap { $0.key != sender ? $0.value.session : nil }
        }
    }

    /// The sessions other than `device`'s (a store `device` left: the others stop leaving its
    /// writes to it).
    package func sessions(except device: DeviceID) -> [Session] {
        routes.compactMap { $0.key != device ? $0.value.session : nil }
    }

    /// What learning that `removed` devices left the account does to the session with `peer`.
    package static func onRemovals(_ removed: Set<DeviceID>, peer: DeviceID, us: DeviceID) -> RemovalAction {
        if removed.contains(peer) { return .expel }
        return removed.contains(us) ? .close : .relay
    }
}
