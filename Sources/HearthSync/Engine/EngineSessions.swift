import Foundation
import HearthCore
import HearthIdentity

/// The engine's sessions, one per peer device: admitted after their hello (the duplicate rule
/// and removed devices, ``Routing``) and let go when they end; what one session's state decided
/// for the others (``RelayEffect``) routed to them; the links each peer is told; and the one
/// heartbeat that ticks them all. The engine owns one and forwards to it.
///
/// The sessions stay in the engine's state, under the engine's one lock (no lock of its own):
/// admitting a session checks that the engine has not stopped in the same step as ``SyncEngine/stop()``
/// takes them all, and the engine's ``RemovalCoordinator`` reads them there too.
final class EngineSessions: Sendable {
    private let state: Locked<SyncEngine.State>
    private let context: EngineContext
    private let removals: DeviceRemovals
    private let devices: KnownDevices?
    private let dialler: PeerDialler
    private let changes: ChangeSignal
    private var identity: DeviceIdentity { context.identity }
    private var options: SyncEngineOptions { context.options }

    init(state: Locked<SyncEngine.State>, context: EngineContext, removals: DeviceRemovals, devices: KnownDevices?,
         dialler: PeerDialler, changes: ChangeSignal) {
        self.state = state
        self.context = context
        self.removals = removals
        self.devices = devices
        self.dialler = dialler
        self.changes = changes
    }

    /// The sessions now.
    var sessions: [SyncSession] { state.withLock { $0.sessions.sessions } }

    /// The devices connected right now.
    var connectedPeers: [DeviceID] { state.withLock { $0.sessions.devices } }

    /// Pushes `store` to every connected peer serving it (after a local write, or to relay what
    /// one peer sent).
    func changed(_ store: String) {
        for session in sessions { session.push(store) }
    }

    /// Runs what a session's state decided the other sessions are to do (``RelayEffect``), on
    /// the sessions ``Routing`` names; each one's own state decides what it means there.
    func route(_ effects: [RelayEffect], from device: DeviceID, in store: SyncStore) {
        for effect in effects {
            let targets = state.withLock { $0.sessions.targets(of: effect, from: device) }
            switch effect {
            case .push(let name), .pushOthers(let name):
                for session in targets { session.push(name) }
            case .originsLearned(let name):
                for session in targets where session.shares(name) { session.noteClaimsNowKnown(of: store) }
            case .tellLinkedPeers(let name, let writers):
                for session in targets { session.tellVectorSoon(of: name, ifLinkedTo: writers, after: Self.vectorTellDelay) }
            }
        }
    }

    /// How long a vector to tell waits for more changes to travel with it.
    static var vectorTellDelay: Duration { .milliseconds(250) }

    /// The devices this engine has a session with now, except `device`, sorted: what a
    /// `links` message tells `device`.
    func linkedDevices(except device: DeviceID) -> [DeviceID] {
        state.withLock { $0.sessions.linked(except: device) }
    }

    /// The devices whose sessions sync `store` now (so they are known to serve it).
    func sharers(of store: String) -> Set<DeviceID> {
        Set(sessions.filter { $0.shares(store) }.map(\.peer.deviceID))
    }

    /// `device` no longer serves `store`: the other sessions stop leaving its writes to it.
    func left(_ store: String, by device: DeviceID) {
        for session in state.withLock({ $0.sessions.sessions(except: device) }) {
            session.forgetDeferred(device, of: store)
        }
    }

    /// The set of sessions changed: every peer is told our links.
    private func linksChanged() {
        for session in sessions { session.relayLinks() }
    }

    /// Admits a session after its hello; refuses a duplicate (see ``SyncEngine``'s documentation)
    /// and a removed device. Checked under the engine's lock, so a removal learned meanwhile
    /// either sees this session (and closes it) or is seen here.
    func register(_ session: SyncSession) -> SyncEngine.Registration {
        let decision = state.withLock { s -> Routing<SyncSession>.Admission in
            guard !s.stopped else { return .duplicate }
            let removed = removals.isRemoved(session.peer.deviceID) || removals.isRemoved(identity.deviceID)
            return s.sessions.admit(session, peer: session.peer.deviceID, initiator: session.initiator, removed: removed)
        }
        switch decision {
        case .accepted(let replaced):
            replaced?.close()
            devices?.note(session.peer.certificate, seen: true)
            if replaced == nil { linksChanged() }
            ensureHeartbeat()
            changes.signal()
            return .accepted
        case .duplicate:
            return .duplicate
        case .removed:
            return .removed
        }
    }

    /// Starts the heartbeat if it is not running: one timer for every session of this engine
    /// (``SyncSession/beat()``), so an idle device wakes once per tick, not once per
    /// connection. It ticks at the shortest period any session asks for, and at least every
    /// `min(heartbeatInterval, timeout / 3)` (a link back in use after a sparse spell is then
    /// watched as closely as before); it ends with the last session.
    private func ensureHeartbeat() {
        state.withLock { s in
            guard !s.stopped, s.heartbeat == nil else { return }
            s.heartbeat = Task { [weak self] in
                while !Task.isCancelled {
                    guard let next = await self?.beatEverySession() else { return }
                    try? await self?.context.clock.sleep(next)
                }
            }
        }
    }

    /// One heartbeat tick of every session, each on its own loop; the time to the next, or nil
    /// (the heartbeat then ends) when there is no session.
    private func beatEverySession() async -> Duration? {
        let sessions = state.withLock { s -> [SyncSession]? in
            guard !s.stopped, !s.sessions.isEmpty else {
                s.heartbeat = nil
                return nil
            }
            return s.sessions.sessions
        }
        guard let sessions else { return nil }
        let base = min(options.heartbeatInterval, options.timeout / 3)
        var next = base
        for session in sessions { next = min(next, await session.beat()) }
        return next
    }

    func unregister(_ session: SyncSession) {
        let device = session.peer.deviceID
        guard state.withLock({ $0.sessions.remove(session, peer: device) }) else { return }
        devices?.note(session.peer.certificate, seen: true)
        linksChanged()
        // After the session is out: a dialler that registers from now on finds none.
        dialler.sessionEnded(with: device)
        changes.signal()
    }

    /// Whether `device` has a session now.
    func hasSession(with device: DeviceID) -> Bool { state.withLock { $0.sessions[device] != nil } }
}
