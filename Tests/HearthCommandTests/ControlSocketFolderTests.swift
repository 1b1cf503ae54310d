import Foundation
@testable import HearthCommand
import HearthDaemon
import Hearth
import HearthCore
import Testing

/// Issue 26, point 2: a `hearth` command talks to a control socket only in a folder of its own
/// user, mode 0700, and only to a listener of its own uid (`SO_PEERCRED`); otherwise it fails,
/// naming the folder, having sent nothing. (Another user's folder and listener need two uids:
/// scripts/local-users.sh.)
@Suite struct ControlSocketFolderTests {
    @Test("The control socket's client refuses a folder open to others, sending nothing; the server refuses to listen there")
    func openFolderIsRefused() async throws {
        let folder = "/tmp/hearth-cs-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = "\(folder)/s.sock"
        let requests = Locked<[String]>([])
        let server = try ControlServer(path: path, note: { _ in })
        defer { server.stop() }
        server.start { line in
            requests.withLock { $0.append(line) }
            return "pong"
        }
        // Our own folder and listener: the request goes through.
        #expect(try await ControlSocket.exchange("ping", with: path, timeout: .seconds(30)) == .reply("pong"))

        #expect(chmod(folder, 0o755) == 0)
        await #expect {
            _ = try await ControlSocket.exchange("secret", with: path, timeout: .seconds(30))
        } throws: { error in
            let message = (error as? CommandError)?.message ?? ""
            return message.contains("\(folder) has mode 755") && message.contains("chmod 700")
        }
        #expect(requests.withLock { $0 } == ["ping"], "the request reached the listener in an open folder")
        #expect(throws: CommandError.self) { _ = try ControlServer(path: "\(folder)/other.sock", note: { _ in }) }

        // A folder that does not exist: nobody listens, nothing to refuse.
        #expect(try await ControlSocket.exchange("x", with: "\(folder)-missing/s.sock", timeout: .seconds(30)) == .noListener)
    }
}
