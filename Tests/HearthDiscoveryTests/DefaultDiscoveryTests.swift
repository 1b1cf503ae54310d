import HearthDiscovery
import Testing

extension AvahiTestNet {
    @Suite("Default discovery")
    struct DefaultDiscoveryTests {
        @Test("uses Avahi when a daemon runs")
        func prefersAvahi() async throws {
            let discovery = try await DefaultDiscovery.start(service: makeService("Default-\(randomHash().prefix(6))", port: 7601),
                                                             environment: ["HEARTH_PEERS": "127.0.0.1:9"])
            #expect(discovery is AvahiDiscovery)
            await discovery.stop()
        }

        @Test("refuses to publish an invalid description, and to start twice")
        func validation() async throws {
            var service = makeService("Invalid", port: 7602)
            service.accountHash = "Not Hex"
            await #expect(throws: DiscoveryError.self) { try await AvahiDiscovery(service: service).start() }
            let discovery = AvahiDiscovery(service: makeService("Twice-\(randomHash().prefix(6))", port: 7603))
            try await discovery.start()
            await #expect(throws: DiscoveryError.alreadyStarted) { try await discovery.start() }
            await discovery.stop()
        }
    }
}
