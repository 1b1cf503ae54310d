import HearthCore

/// Several discoveries seen as one, e.g. Avahi plus the static peers of `HEARTH_PEERS` that
/// mDNS cannot reach (another subnet, a VPN). Events of every member are forwarded as they
/// come; peer IDs stay distinct because each kind has its own prefix (`mdns:`, `static:`).
package final class MergedDiscovery: PeerDiscovery {
    /// The discoveries merged, in start order.
    package let members: [any PeerDiscovery]
    private let registry = PeerRegistry()
    private let forwarders = Locked<[Task<Void, Never>]>([])

    /// Merges `members`; nothing starts until ``start()``.
    package init(_ members: [any PeerDiscovery]) {
        self.members = members
    }

    /// Starts every member in order. If one fails, those already started are stopped and
    /// the error is rethrown (so ``DiscoveryError/daemonUnavailable(_:)`` still reaches the caller).
    package func start() async throws {
        var started: [any PeerDiscovery] = []
        for member in members {
            do {
                try await member.start()
                started.append(member)
            } catch {
                for member in started { await member.stop() }
                throw error
            }
        }
        let tasks = members.map { member in
            let stream = member.events()
            return Task { [registry] in
                for await event in stream { registry.publish(event) }
            }
        }
        forwarders.withLock { $0 = tasks }
    }

    /// Stops every member, then finishes the merged streams once their last events are in.
    package func stop() async {
        for member in members { await member.stop() }
        // Members' streams finish on stop, so the forwarders end by themselves.
        let tasks = forwarders.withLock { $0 }
        for task in tasks { await task.value }
        registry.finishAll()
    }

    package func events() -> AsyncStream<PeerEvent> { registry.subscribe() }

    package var peers: [DiscoveredPeer] { registry.peers }
}
