import HearthCore

/// The peers a discovery knows and the streams that follow them, behind one lock so a new
/// subscriber's replay and later events can never interleave wrongly.
final class PeerRegistry: Sendable {
    private struct State {
        var peers: [String: DiscoveredPeer] = [:]
        var subscribers: [Int: AsyncStream<PeerEvent>.Continuation] = [:]
        var nextSubscriber = 0
        var finished = false
    }

    private let state = Locked(State())

    var peers: [DiscoveredPeer] {
        state.withLock { Array($0.peers.values) }.sorted { $0.id < $1.id }
    }

    /// Records a change and tells every subscriber.
    func publish(_ event: PeerEvent) {
        state.withLock { state in
            switch event {
            case .appeared(let peer), .updated(let peer): state.peers[peer.id] = peer
            case .gone(let peer): state.peers[peer.id] = nil
            }
            // yield never blocks (unbounded buffer), so doing it under the lock is cheap and
            // keeps the order of events identical for every subscriber.
            for continuation in state.subscribers.values { continuation.yield(event) }
        }
    }

    /// Replaces the whole set (static discovery), emitting the differences.
    func replaceAll(with peers: [DiscoveredPeer]) {
        let new = Dictionary(peers.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        let old = state.withLock { $0.peers }
        for (id, peer) in old where new[id] == nil { publish(.gone(peer)) }
        for (id, peer) in new.sorted(by: { $0.key < $1.key }) {
            if let before = old[id] {
                if before != peer { publish(.updated(peer)) }
            } else {
                publish(.appeared(peer))
            }
        }
    }

    func subscribe() -> AsyncStream<PeerEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: PeerEvent.self)
        let id: Int? = state.withLock { state in
            if state.finished { return nil }
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            for peer in state.peers.values.sorted(by: { $0.id < $1.id }) { continuation.yield(.appeared(peer)) }
            state.subscribers[id] = continuation
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        // Runs on the cancelling task's thread, never inside our lock (finishAll finishes
        // outside it), so taking the lock here cannot deadlock.
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Ends every stream and refuses new subscribers.
    func finishAll() {
        let continuations = state.withLock { state in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
