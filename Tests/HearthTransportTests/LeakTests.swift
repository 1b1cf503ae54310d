import Foundation
import HearthIdentity
import HearthTestSupport
@testable import HearthTransport
import NIOCore
import Testing

extension TransportTests {
    @Suite("Resource leaks")
    struct LeakTests {

        func oneConnection(_ transport: PeerTransport, port: Int, _ i: Int) async throws {
            let connection = try await transport.connect(host: "127.0.0.1", port: port)
            let echoed = try await connection.executeThenClose { inbound, outbound in
                var frames = inbound.makeAsyncIterator()
                _ = try await frames.next()
                try await outbound.write(ByteBuffer(string: "ping \(i)"))
                return try await frames.next().map { String(buffer: $0) }
            }
            #expect(echoed == "ping \(i)")
        }

        @Test("1,000 connections leave no sockets, SSL objects or memory behind")
        func thousandConnections() async throws {
            // What is counted (descriptors, live SSL objects, resident memory) is the whole
            // process's: the suites that run beside this one would disturb it. So the
            // measurement runs alone, in a child: this test binary, filtered to this test.
            guard ProcessInfo.processInfo.environment[Self.childVariable] != nil else {
                let (output, status) = try await runProcess(
                    "/proc/self/exe", ["--testing-library", "swift-testing", "--filter", "LeakTests"],
                    environment: [Self.childVariable: "1"], timeout: .seconds(120))
                let lines = output.split(separator: "\n")
                for line in lines where line.contains("1,000 connections in") { print("child: \(line)") }
                #expect(status == 0, "the measuring child failed:\n\(lines.filter { $0.contains("✘") || $0.contains("↳") }.joined(separator: "\n"))")
                #expect(lines.contains { $0.contains("1,000 connections in") }, "the child did not measure:\n\(output.suffix(2000))")
                return
            }
            try await measure()
        }

        static let childVariable = "HEARTH_LEAK_TEST_CHILD"

        func measure() async throws {
            let home = try Household()
            let server = try await EchoServer(identity: home.server)
            let transport = try clientTransport(home.laptop)
            // Warm up: let NIO's threads, allocator pools and OpenSSL's tables settle.
            for i in 0..<50 { try await oneConnection(transport, port: server.port, i) }
            #expect(await eventually { server.state.outcomes.withLock { $0.count } == 50 })
            #expect(await eventually { SSLConnection.live.load(ordering: .relaxed) == 0 })

            let socketsBefore = openSockets()
            let targetsBefore = fileDescriptorTargets()
            let rssBefore = residentKiB()
            let start = ContinuousClock.now
            for i in 0..<1_000 { try await oneConnection(transport, port: server.port, i) }
            let elapsed = ContinuousClock.now - start
            #expect(await eventually { server.state.outcomes.withLock { $0.count } == 1_050 })
            let settled = await eventually { openSockets() <= socketsBefore && SSLConnection.live.load(ordering: .relaxed) == 0 }
            let socketsAfter = openSockets()
            let rssAfter = residentKiB()
            print("1,000 connections in \(elapsed): sockets \(socketsBefore) → \(socketsAfter), live SSL objects \(SSLConnection.live.load(ordering: .relaxed)), RSS \(rssBefore) KiB → \(rssAfter) KiB")
            #expect(settled)
            let targetsAfter = fileDescriptorTargets()
            #expect(socketsAfter <= socketsBefore, "new: \(targetsAfter.filter { targetsBefore[$0.key] != $0.value }), gone: \(targetsBefore.filter { targetsAfter[$0.key] != $0.value })")
            #expect(SSLConnection.live.load(ordering: .relaxed) == 0)
            // Each connection holds an SSL object, BIOs and NIO buffers of tens of KiB: a
            // leak of any of them would grow RSS by tens of MiB over 1,000 connections.
            #expect(rssAfter - rssBefore < 8 * 1024, "RSS grew by \(rssAfter - rssBefore) KiB")
            #expect(server.state.outcomes.withLock { $0.allSatisfy { $0.1 == nil } })
            await server.stop()
        }
    }
}
