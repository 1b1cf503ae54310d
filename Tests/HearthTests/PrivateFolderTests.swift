import Foundation
@testable import Hearth
import Testing

/// Issue 26, point 2: the one check of the folders that hold Hearth's sockets and locks
/// (`PrivateFolder`, used by the library and the command), and the client's check of who
/// listens on a socket. Another user's folder cannot be made by one uid: scripts/local-users.sh
/// runs that attack with two real users.
@Suite struct PrivateFolderTests {
    /// A fresh parent folder under /tmp (short: socket paths must fit in 108 bytes).
    let parent = "/tmp/hearth-pf-\(UUID().uuidString.prefix(8))"

    init() throws {
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: parent) }

    func mode(_ path: String) -> mode_t? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o7777
    }

    // Not under another umask here: it is the process's, and tests run in parallel
    // (FileModeTests runs hearth under umask 000 in a child instead).
    @Test("A missing folder is created 0700 and is then usable; an existing one of ours is kept")
    func missingIsCreatedPrivate() throws {
        defer { cleanUp() }
        let folder = "\(parent)/run"
        #expect(PrivateFolder.inspect(folder) == .missing)
        #expect(throws: PrivateFolder.Refusal.self) { try PrivateFolder.check(folder) }
        try PrivateFolder.prepare(folder)
        #expect(mode(folder) == 0o700)
        #expect(PrivateFolder.inspect(folder) == .usable)
        try PrivateFolder.prepare(folder)      // again: it exists, still fine
    }

    @Test("A folder of ours open to others (0755) is refused, saying its mode and what to do; never chmod-ed behind our back")
    func openFolderIsRefused() throws {
        defer { cleanUp() }
        let folder = "\(parent)/open"
        #expect(mkdir(folder, 0o700) == 0 && chmod(folder, 0o755) == 0)
        let refusal = try #require(throws: PrivateFolder.Refusal.self) { try PrivateFolder.prepare(folder) }
        #expect(refusal.description.contains("\(folder) has mode 755"), "\(refusal)")
        #expect(refusal.description.contains("chmod 700 \(folder)"), "\(refusal)")
        #expect(mode(folder) == 0o755)
        // The library's wrapper says the same.
        #expect(throws: LocalAttachError.self) { try LocalSocketDirectory.check(folder) }
    }

    @Test("A symbolic link to a folder of ours is refused, not followed")
    func symlinkIsRefused() throws {
        defer { cleanUp() }
        let target = "\(parent)/target"
        try PrivateFolder.prepare(target)
        let link = "\(parent)/link"
        #expect(symlink(target, link) == 0)
        let refusal = try #require(throws: PrivateFolder.Refusal.self) { try PrivateFolder.prepare(link) }
        #expect(refusal.description.contains("\(link) is a symbolic link"), "\(refusal)")
        #expect(refusal.description.contains("set XDG_RUNTIME_DIR and TMPDIR to folders of yours"), "\(refusal)")
    }

    @Test("A file where the folder should be is refused")
    func fileIsRefused() throws {
        defer { cleanUp() }
        let file = "\(parent)/file"
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        let refusal = try #require(throws: PrivateFolder.Refusal.self) { try PrivateFolder.prepare(file) }
        #expect(refusal.description.contains("\(file) is not a folder"), "\(refusal)")
    }

    @Test("A folder of another user is refused, naming its owner",
          .enabled(if: geteuid() != 0, "root owns the folder used here"))
    func otherOwnerIsRefused() throws {
        defer { cleanUp() }
        // A root-owned folder any user can see (the test runs as another user).
        let refusal = try #require(throws: PrivateFolder.Refusal.self) { try PrivateFolder.check("/usr") }
        #expect(refusal.description.contains("/usr belongs to root (uid 0), not to you"), "\(refusal)")
    }

    @Test("SO_PEERCRED: a client reads our own uid for our own listener, and checkServer lets it through")
    func peerCredentialsOfOwnServer() throws {
        defer { cleanUp() }
        let folder = "\(parent)/run"
        try PrivateFolder.prepare(folder)
        let path = "\(folder)/s.sock"
        var address = try #require(LocalSocketDirectory.address(path))
        let server = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(server) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(server, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0 && listen(server, 1) == 0)
        let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(client) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(connected == 0)
        #expect(PrivateFolder.peerUID(client) == geteuid())
        try PrivateFolder.checkServer(client, at: path)
        // A descriptor that is no socket gives no credentials, and checkServer refuses it.
        let notSocket = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { close(notSocket) }
        #expect(PrivateFolder.peerUID(notSocket) == nil)
        #expect(throws: PrivateFolder.Refusal.self) { try PrivateFolder.checkServer(notSocket, at: "/dev/null") }
    }
}
