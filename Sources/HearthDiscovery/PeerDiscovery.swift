/// Finds the peers of this device's account and store, and makes this device findable.
///
/// The sync engine uses it like this:
///
/// ```swift
/// let discovery: any PeerDiscovery = try await DefaultDiscovery.start(service: description)
/// for await event in discovery.events() {
///     switch event {
///     case .appeared(let peer), .updated(let peer): connect(to: peer.addresses, port: peer.port)
///     case .gone(let peer): forget(peer.id)
///     }
/// }
/// ```
package protocol PeerDiscovery: Sendable {
    /// Starts publishing this device (where the mechanism publishes) and looking for peers.
    ///
    /// - Throws: ``DiscoveryError``; ``DiscoveryError/daemonUnavailable(_:)`` means the
    ///   caller should fall back to another discovery.
    func start() async throws

    /// Withdraws this device's service, stops browsing and finishes every event stream.
    func stop() async

    /// A new stream of peer events. It first replays the peers already known as
    /// ``PeerEvent/appeared(_:)``, so a late subscriber misses nothing, then follows changes.
    /// It finishes when discovery stops.
    func events() -> AsyncStream<PeerEvent>

    /// The peers known right now.
    var peers: [DiscoveredPeer] { get }
}
