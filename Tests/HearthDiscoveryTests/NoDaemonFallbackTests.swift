import Foundation
import HearthDiscovery
import HearthTestSupport
import Testing

/// Without any Avahi daemon: a clear error, and static peers still connect. These run a probe
/// process pointed at a bus without Avahi, so they need neither root nor the test network.
@Suite("No avahi-daemon: clear error and static fallback")
struct NoDaemonFallbackTests {
    @Test("no D-Bus at all: daemonUnavailable, then a HEARTH_PEERS peer is connected over TCP",
          .enabled(if: TestNet.probePath != nil, "hearth-discovery-probe not built"))
    func noBusFallsBackToStatic() async throws {
        try await runFallback(busAddress: "unix:path=/nonexistent/hearth-no-bus", expectedError: "cannot reach the system D-Bus")
    }

    @Test("a D-Bus without avahi-daemon: daemonUnavailable says so, then static peers connect",
          .enabled(if: TestNet.probePath != nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon"),
                   "needs hearth-discovery-probe and dbus-daemon"))
    func busWithoutAvahiFallsBackToStatic() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-bus-\(randomHash())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = directory.appendingPathComponent("bus").path
        let config = directory.appendingPathComponent("bus.conf")
        try """
        <busconfig><type>system</type><listen>unix:path=\(socket)</listen><auth>EXTERNAL</auth>
        <policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/>\
        <allow receive_sender="*"/></policy></busconfig>
        """.write(to: config, atomically: true, encoding: .utf8)
        // Foreground bus, a child of this test, stopped below.
        let bus = try ChildProcess("/usr/bin/dbus-daemon", ["--config-file=\(config.path)", "--nofork"])
        defer { bus.terminate() }
        #expect(await eventually { FileManager.default.fileExists(atPath: socket) })
        try await runFallback(busAddress: "unix:path=\(socket)", expectedError: "avahi-daemon is not running")
    }

    private func runFallback(busAddress: String, expectedError: String) async throws {
        let probe = try #require(TestNet.probePath)
        let listener = try TCPListener()
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = busAddress
        environment["HEARTH_PEERS"] = "127.0.0.1:\(listener.port)"
        let clock = ContinuousClock()
        let start = clock.now
        let child = try ChildProcess(probe, ["--fallback", "--expect", "1", "--timeout", "10"], environment: environment)
        let accepted = await onThread { listener.accept(timeoutMilliseconds: 10_000) }
        let status = await child.wait(upTo: .seconds(15))
        print("fallback probe (\(clock.now - start)):\n\(child.output)")
        #expect(status == 0, "probe failed: \(child.output)\n\(child.errorOutput)")
        #expect(child.output.contains("unavailable mDNS unavailable: \(expectedError)"))
        #expect(child.output.contains("static 127.0.0.1:\(listener.port)"))
        #expect(child.output.contains("connected 127.0.0.1:\(listener.port)"))
        #expect(accepted, "the listener found through StaticDiscovery was never connected to")
    }
}

/// A loopback TCP listener on an ephemeral port (plain sockets: enough to prove a connect).
final class TCPListener: Sendable {
    let descriptor: Int32
    let port: UInt16

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(descriptor, raw, length) == 0 && listen(descriptor, 4) == 0
                    && getsockname(descriptor, raw, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        self.descriptor = descriptor
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close(descriptor) }

    /// True if a client connected within the timeout.
    func accept(timeoutMilliseconds: Int32) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, timeoutMilliseconds) == 1 else { return false }
        let client = Glibc.accept(descriptor, nil, nil)
        guard client >= 0 else { return false }
        close(client)
        return true
    }
}
