import HearthDiscovery
import Logging
import Testing
import HearthTestSupport

extension AvahiTestNet {
    @Suite("Default discovery")
    struct DefaultDiscoveryTests {
        @Test("uses Avahi when a daemon runs, merged with static peers when some are configured")
        func prefersAvahi() async throws {
            let noConfig = ["XDG_CONFIG_HOME": "/nonexistent"]
            let plain = try await DefaultDiscovery.start(service: makeService("Default-\(randomHash().prefix(6))", port: 7601),
                                                         environment: noConfig, logger: Logger(label: "test"))
            #expect(plain is AvahiDiscovery)
            await plain.stop()

            var withPeers = noConfig
            withPeers["HEARTH_PEERS"] = "192.0.2.1:9"
            let merged = try await DefaultDiscovery.start(service: makeService("Merged-\(randomHash().prefix(6))", port: 7604),
                                                          environment: withPeers, logger: Logger(label: "test"))
            let members = try #require((merged as? MergedDiscovery)?.members)
            #expect(members.first is AvahiDiscovery)
            #expect(members.last is StaticDiscovery)
            #expect(await eventually { merged.peers.map(\.id) == ["static:192.0.2.1:9"] })
            await merged.stop()
        }

        @Test("refuses to publish an invalid description, and to start twice")
        func validation() async throws {
            var service = makeService("Invalid", port: 7602)
            service.accountHash = "Not Hex"
            await #expect(throws: DiscoveryError.self) { try await AvahiDiscovery(service: service, logger: Logger(label: "test")).start() }
            let discovery = AvahiDiscovery(service: makeService("Twice-\(randomHash().prefix(6))", port: 7603), logger: Logger(label: "test"))
            try await discovery.start()
            await #expect(throws: DiscoveryError.alreadyStarted()) { try await discovery.start() }
            await discovery.stop()
        }
    }
}
