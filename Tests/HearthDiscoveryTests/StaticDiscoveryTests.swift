import Foundation
import Logging
import HearthDiscovery
import Testing
import HearthTestSupport

@Suite("Static peer lists")
struct StaticDiscoveryTests {
    @Test("host:port, IPv4, bracketed IPv6, separators and comments")
    func parsing() throws {
        let endpoints = try StaticDiscovery.parse("""
            # the household
            192.168.1.20:7420, laptop.lan:7421   [fd00::2]:7422
            [fe80::1%eth0]:7423 # link-local with scope
            """)
        #expect(endpoints == [
            .init(host: "192.168.1.20", port: 7420), .init(host: "laptop.lan", port: 7421),
            .init(host: "fd00::2", port: 7422), .init(host: "fe80::1%eth0", port: 7423),
        ])
        #expect(endpoints.map(\.description) == ["192.168.1.20:7420", "laptop.lan:7421", "[fd00::2]:7422", "[fe80::1%eth0]:7423"])
    }

    @Test("malformed entries are refused with the entry and the reason",
          arguments: ["laptop", "laptop:", "laptop:0", "laptop:70000", "fd00::2:7420", "[fd00::2]7420", ":7420", "a b/c:1", "[fd00::2:7420"])
    func malformed(entry: String) {
        #expect(throws: DiscoveryError.self) { try StaticDiscovery.parse(entry) }
    }

    @Test("HEARTH_PEERS, then the config file, are the default sources")
    func sources() throws {
        #expect(try StaticDiscovery.fromEnvironment([:], logger: Logger(label: "test")) == nil)
        #expect(try StaticDiscovery.fromEnvironment(["HEARTH_PEERS": "  "], logger: Logger(label: "test")) == nil)
        let fromEnvironment = try #require(try StaticDiscovery.fromEnvironment(["HEARTH_PEERS": "10.0.0.1:1,10.0.0.2:2"], logger: Logger(label: "test")))
        #expect(fromEnvironment.endpoints.count == 2)

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-config-\(randomHash())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = ["XDG_CONFIG_HOME": directory.path, "HOME": "/nonexistent"]
        #expect(StaticDiscovery.defaultConfigPath(environment: environment) == directory.path + "/hearth/peers")
        #expect(StaticDiscovery.defaultConfigPath(environment: ["HOME": "/home/x"]) == "/home/x/.config/hearth/peers")
        #expect(try StaticDiscovery.fromDefaultSources(environment: environment, logger: Logger(label: "test")) == nil)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("hearth"), withIntermediateDirectories: true)
        try "# peers\n10.0.0.3:3\n10.0.0.3:3\n".write(toFile: directory.path + "/hearth/peers", atomically: true, encoding: .utf8)
        let fromFile = try #require(try StaticDiscovery.fromDefaultSources(environment: environment, logger: Logger(label: "test")))
        #expect(fromFile.endpoints == [.init(host: "10.0.0.3", port: 3)])   // duplicates dropped
        // The environment wins over the file.
        var both = environment
        both["HEARTH_PEERS"] = "10.0.0.9:9"
        #expect(try StaticDiscovery.fromDefaultSources(environment: both, logger: Logger(label: "test"))?.endpoints == [.init(host: "10.0.0.9", port: 9)])
        #expect(throws: DiscoveryError.self) { try StaticDiscovery.fromConfigFile(at: "/nonexistent/peers", logger: Logger(label: "test")) }
    }

    @Test("start reports every endpoint as appeared; a listener found this way accepts a TCP connect")
    func eventsAndConnect() async throws {
        let listener = try TCPListener()
        let discovery = StaticDiscovery(endpoints: [.init(host: "127.0.0.1", port: listener.port), .init(host: "laptop.lan", port: 7)], logger: Logger(label: "test"))
        let recorder = EventRecorder(discovery)
        try await discovery.start()
        #expect(await recorder.wait(upTo: .seconds(30)) { $0.count == 2 } != nil)
        let peer = try #require(discovery.peers.first { $0.port == listener.port })
        #expect(peer.id == "static:127.0.0.1:\(listener.port)")
        #expect(peer.addresses == [PeerAddress(host: "127.0.0.1", family: .ipv4)])
        #expect(peer.record == nil)
        #expect(discovery.peers.first { $0.port == 7 }?.addresses.first?.family == .hostname)

        // Both calls block: on threads of their own, never on the cooperative pool (two threads
        // here; blocking one starved the connector under load).
        async let connected = onThread { connectTCP(host: "127.0.0.1", port: peer.port) }
        #expect(await onThread { listener.accept(timeoutMilliseconds: 30_000) })
        #expect(await connected)
        await discovery.stop()
    }
}

/// A blocking TCP connect, for the static-fallback checks.
func connectTCP(host: String, port: UInt16) -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr(host)
    address.sin_port = port.bigEndian
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

@Suite("Merged discoveries")
struct MergedDiscoveryTests {
    @Test("forwards every member's events and finishes when stopped")
    func merges() async throws {
        let first = StaticDiscovery(endpoints: [.init(host: "192.0.2.1", port: 1)], logger: Logger(label: "test"))
        let second = StaticDiscovery(endpoints: [.init(host: "192.0.2.2", port: 2)], logger: Logger(label: "test"))
        let merged = MergedDiscovery([first, second])
        let recorder = EventRecorder(merged)
        try await merged.start()
        #expect(await eventually { Set(merged.peers.map(\.id)) == ["static:192.0.2.1:1", "static:192.0.2.2:2"] })
        #expect(await recorder.wait(upTo: .seconds(1)) { $0.count == 2 } != nil)
        await merged.stop()
        var iterator = merged.events().makeAsyncIterator()
        #expect(await iterator.next() == nil)
    }
}
