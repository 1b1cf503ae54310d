import Foundation
import HearthIdentity
@testable import HearthTransport
import NIOCore
import Testing

extension TransportTests {
    @Suite("Listening sockets")
    struct ListenerTests {
        @Test("The listening socket is close-on-exec")
        func closeOnExec() throws {
            let fd = try PeerTransport.listeningSocket(SocketAddress(ipAddress: "127.0.0.1", port: 0))
            defer { close(fd) }
            #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0)
        }

        @Test("A child process started meanwhile does not keep the port: the next listener binds it at once")
        func childDoesNotInheritPort() async throws {
            let home = try Household()
            let transport = try clientTransport(home.server)
            // A port above the kernel's ephemeral range (32768–60999 here) and outside the one
            // the test clusters hand out (LoopbackCluster.freePort: 20000–31999): nothing else
            // in the suite can take it between our close and our second bind.
            var listener: PeerListener?
            for candidate in (61_000..<65_000).shuffled().prefix(50) where listener == nil {
                listener = try? await transport.listen(host: "127.0.0.1", port: candidate)
            }
            let first = try #require(listener)
            let port = try #require(first.port)
            // posix_spawn keeps every descriptor without close-on-exec, as fork/exec does.
            let child = try spawnSleeper()
            defer { kill(child, SIGKILL); var status: Int32 = 0; waitpid(child, &status, 0) }
            await first.close()
            // "At once" within a second: another test's posix_spawn may be between its clone and
            // its exec, holding a copy of every descriptor (close-on-exec ones too) for that
            // moment. The sleeper, had it inherited the socket, would hold it for 30 s.
            var second: PeerListener?
            let deadline = ContinuousClock.now + .seconds(1)
            while second == nil {
                do {
                    second = try await transport.listen(host: "127.0.0.1", port: port)
                } catch where ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            #expect(second?.port == port)
            await second?.close()
        }

        /// `sleep 30`, started with posix_spawn and no file actions.
        func spawnSleeper() throws -> pid_t {
            var pid: pid_t = 0
            let words: [String] = ["/bin/sleep", "30"]
            let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            let result = posix_spawn(&pid, "/bin/sleep", nil, nil, argv, environ)
            guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EINVAL) }
            return pid
        }
    }
}
