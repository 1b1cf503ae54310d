import Foundation
import HearthCore
import HearthDaemon
import Testing

/// A control socket's listener never answers for another: the daemon opens and closes one per
/// store it holds, so a listener stopped before its accepting thread ran must not leave that
/// thread to accept on the descriptor number the next listener gets. Before the fix (the
/// thread could call `accept` on a number `stop()` had closed and `socket()` had handed out
/// again), InProcessDaemonTests' status request was answered by another test's daemon under
/// ThreadSanitizer, and this test's second listener lost its connections to the first's
/// handler in most rounds.
@Suite struct ControlServerTests {
    @Test("A listener stopped at once leaves nothing accepting on the descriptor the next listener gets")
    func stoppedListenerStealsNothing() async throws {
        let folder = "/tmp/hearth-cst-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for round in 0..<50 {
            let first = try ControlServer(path: "\(folder)/first.sock", note: { _ in })
            first.start { _ in "first" }
            first.stop()
            let second = try ControlServer(path: "\(folder)/second.sock", note: { _ in })
            second.start { _ in "second" }
            defer { second.stop() }
            for _ in 0..<3 {
                let answer = try await ControlSocket.exchange("who", with: "\(folder)/second.sock", timeout: .seconds(30))
                #expect(answer == .reply("second"), "round \(round): the stopped listener's thread answered")
            }
        }
    }

    @Test("stop() twice, or before start(), closes the descriptor once and leaves the path free")
    func stopIsIdempotent() async throws {
        let folder = "/tmp/hearth-cst-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let never = try ControlServer(path: "\(folder)/never.sock", note: { _ in })
        never.stop()
        never.stop()
        never.start { _ in "never" }     // after stop: does nothing
        #expect(try await ControlSocket.exchange("x", with: "\(folder)/never.sock", timeout: .seconds(5)) == .noListener)

        let kept = try ControlServer(path: "\(folder)/kept.sock", note: { _ in })
        kept.start { _ in "kept" }
        defer { kept.stop() }
        // A second stop of `never` must not shut down whatever now has its old number.
        never.stop()
        #expect(try await ControlSocket.exchange("x", with: "\(folder)/kept.sock", timeout: .seconds(30)) == .reply("kept"))
    }
}
