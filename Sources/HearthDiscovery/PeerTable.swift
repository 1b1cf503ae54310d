/// Folds per-interface, per-protocol service instances into one peer per service name.
///
/// mDNS reports a service once per (interface, IP protocol) it is seen on; the engine
/// wants one peer with all its addresses. Pure and deterministic, so it is unit-tested
/// without a daemon.
struct PeerTable: Sendable {
    /// One sighting of a service: Avahi's browse/resolve coordinates.
    struct InstanceKey: Sendable, Hashable {
        var name: String
        var domain: String
        var interfaceIndex: Int32
        var ipProtocol: Int32

        var peerID: String { "mdns:\(name).\(domain)" }
    }

    /// What resolving one instance produced.
    struct Resolution: Sendable, Hashable {
        var address: PeerAddress
        var port: UInt16
        var txt: [String: String]
        var record: ServiceRecord?
    }

    private var instances: [InstanceKey: Resolution] = [:]
    /// Insertion counter, so the freshest resolution decides port and TXT.
    private var order: [InstanceKey: Int] = [:]
    private var counter = 0
    private(set) var peers: [String: DiscoveredPeer] = [:]

    /// Records a resolution; returns the event it causes, if any.
    mutating func upsert(_ key: InstanceKey, _ resolution: Resolution) -> PeerEvent? {
        counter += 1
        instances[key] = resolution
        order[key] = counter
        return recompute(key)
    }

    /// Forgets an instance; returns the event it causes, if any.
    mutating func remove(_ key: InstanceKey) -> PeerEvent? {
        guard instances.removeValue(forKey: key) != nil else { return nil }
        order[key] = nil
        return recompute(key)
    }

    /// Every instance key currently held.
    var keys: Set<InstanceKey> { Set(instances.keys) }

    private mutating func recompute(_ key: InstanceKey) -> PeerEvent? {
        let id = key.peerID
        let previous = peers[id]
        let mine = instances.filter { $0.key.peerID == id }
        guard let freshest = mine.max(by: { order[$0.key, default: 0] < order[$1.key, default: 0] }) else {
            peers[id] = nil
            return previous.map { .gone($0) }
        }
        let addresses = Array(Set(mine.values.map(\.address))).sorted()
        let peer = DiscoveredPeer(id: id, name: key.name, addresses: addresses, port: freshest.value.port,
                                  txt: freshest.value.txt, record: freshest.value.record)
        peers[id] = peer
        guard let previous else { return .appeared(peer) }
        return previous == peer ? nil : .updated(peer)
    }
}
