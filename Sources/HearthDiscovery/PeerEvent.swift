/// A change in the set of peers a ``PeerDiscovery`` sees.
package enum PeerEvent: Sendable, Hashable {
    /// A peer of our account and store can now be connected to.
    case appeared(DiscoveredPeer)
    /// A known peer changed: an address was added or lost, the port or the TXT changed.
    case updated(DiscoveredPeer)
    /// A peer is no longer announced (it stopped, left the network or its record expired).
    /// Carries the last known state.
    case gone(DiscoveredPeer)

    /// The peer the event is about.
    package var peer: DiscoveredPeer {
        switch self {
        case .appeared(let peer), .updated(let peer), .gone(let peer): peer
        }
    }
}
