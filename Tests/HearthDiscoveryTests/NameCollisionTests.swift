import HearthDiscovery
import Logging
import Testing
import HearthTestSupport

extension AvahiTestNet {
    @Suite("Name collisions")
    struct NameCollisionTests {
        @Test("a second device with the same name is re-published under an alternative name")
        func collisionRenames() async throws {
            let account = randomHash(), store = randomHash()
            let name = "Same name \(account.prefix(6))"
            let first = AvahiDiscovery(service: makeService(name, port: 7401, account: account, store: store), logger: Logger(label: "test"))
            let second = AvahiDiscovery(service: makeService(name, port: 7402, account: account, store: store), logger: Logger(label: "test"))
            try await first.start()
            #expect(await eventually { first.publishedName == name })
            try await second.start()
            #expect(await eventually { second.publishedName != nil })
            let alternative = try #require(second.publishedName)
            #expect(alternative != name)
            #expect(alternative.hasPrefix(name))
            // Both are reachable, under their distinct names.
            #expect(await eventually { first.peers.map(\.name) == [alternative] })
            #expect(await eventually { second.peers.map(\.name) == [name] })
            await second.stop()
            await first.stop()
        }
    }
}
