import HearthCore

/// The life of an Avahi-backed discovery, shared by ``AvahiDiscovery`` and ``PairingDiscovery``:
/// not started, running one ``AvahiSession``, stopped; and the registry its events come from.
///
/// Avahi's thread holds an unretained pointer to the session: it must stop before the session
/// can go, even if the owner forgot `stop()`, hence the `deinit`.
final class AvahiSessionHolder: Sendable {
    private enum Phase {
        case idle
        case running(AvahiSession)
        case stopped
    }

    let registry = PeerRegistry()
    private let phase = Locked(Phase.idle)

    /// Starts the session `make` builds (with ``registry``), once.
    ///
    /// - Throws: ``DiscoveryError/alreadyStarted`` after a start or a stop, or what `make` and
    ///   the session's start throw.
    func start(requiringDaemon: Bool, _ make: (PeerRegistry) throws -> AvahiSession) throws {
        guard phase.withLock({ if case .idle = $0 { return true } else { return false } }) else {
            throw DiscoveryError.alreadyStarted()
        }
        let session = try make(registry)
        try session.start(requiringDaemon: requiringDaemon)
        let lost = phase.withLock { phase -> Bool in
            guard case .idle = phase else { return true }
            phase = .running(session)
            return false
        }
        if lost {   // start raced with another start or a stop
            session.stop()
            throw DiscoveryError.alreadyStarted()
        }
    }

    /// Stops the session, if one runs, and finishes every event stream.
    func stop() {
        let session = phase.withLock { phase -> AvahiSession? in
            defer { phase = .stopped }
            if case .running(let session) = phase { return session }
            return nil
        }
        session?.stop()
        registry.finishAll()
    }

    /// The running session, if any.
    var session: AvahiSession? {
        phase.withLock { if case .running(let session) = $0 { return session } else { return nil } }
    }

    deinit {
        if case .running(let session) = phase.withLock({ $0 }) {
            session.stop()
            registry.finishAll()
        }
    }
}
