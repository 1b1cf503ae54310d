import Foundation
import HearthCore
import HearthDaemon
import HearthIdentity
import Testing

/// The device daemon run as a library, in the test's own process (docs/daemon.md): started
/// with its folders injected, reached through the same control clients `hearth` uses, and
/// stopped with a barrier. What only a separate process shows (signals, exit statuses, a
/// killed daemon's lock, apps attaching with `.required`) stays in HearthCommandTests.
@Suite
struct InProcessDaemonTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-daemonlib-\(UUID().uuidString)").path
    /// Short, as a socket's path must fit in 108 bytes.
    let runtime = "/tmp/hrt-\(UUID().uuidString.prefix(8))"
    /// What the daemon says, kept instead of printed.
    let notes = Lines()

    var options: DaemonOptions {
        // Signed out (no account in the config folder): the daemon holds local stores, no engine.
        // A rescan an hour away: every store here is held at a request, not found by a scan.
        DaemonOptions(folders: DeviceFolders(accountDirectory: URL(fileURLWithPath: "\(root)/config"), storeDataDirectory: "\(root)/data"),
                      runtimeDirectory: runtime, rescanInterval: .seconds(3600), output: notes.output)
    }

    func location(_ store: String) -> StoreLocation {
        StoreLocation(dataDirectory: "\(root)/data", storeIdentifier: store, account: nil)
    }

    /// Sends one request line to the socket at `path`; the reply's fields (status 0) or its error.
    func ask(_ line: String, at path: String) async throws -> JSONObject {
        guard case .reply(let reply) = try await ControlSocket.exchange(line, with: path, timeout: .seconds(10)) else {
            throw CommandError(.general, "no reply from \(path)")
        }
        return try ControlRequest.fields(ofReply: reply)
    }

    @Test("Started in-process: answers status, refuses a second daemon, holds a store on request and takes its writes; stop() is a barrier")
    func startHoldStop() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let daemon = try DeviceDaemon.start(options)
        let store = location("com.example.colors")

        // Status through the daemon's control socket, as `hearth daemon status` asks it.
        guard case .reply(let line) = try await DaemonControl.askStatus(in: runtime, timeout: .seconds(10)) else {
            Issue.record("the daemon did not answer its status request")
            await daemon.stop()
            return
        }
        let status = try ControlRequest.fields(ofReply: line)
        #expect(status.integer("pid") == Int64(getpid()))
        #expect(status.string("dataDirectory") == "\(root)/data")
        #expect(status["stores"] == .array([]))
        #expect(DaemonLock.runningPid(in: runtime) == getpid())

        // One daemon per runtime folder, even in one process: the lock is per open file.
        do {
            let second = try DeviceDaemon.start(options)
            Issue.record("a second daemon started in the same runtime folder")
            await second.stop()
        } catch let error as CommandError {
            #expect(error.status == .daemonRunning && error.message.contains("pid \(getpid())"), "\(error)")
        }

        // Held at a client's request (what `hearth set` and apps ask first); not for another folder.
        #expect(try await DaemonControl.askToHold(store, runtimeDirectory: runtime))
        let elsewhere = StoreLocation(dataDirectory: "\(root)/other", storeIdentifier: "com.example.colors", account: nil)
        #expect(try await !DaemonControl.askToHold(elsewhere, runtimeDirectory: runtime))
        #expect(notes.all.contains("daemon: holding store com.example.colors (asked by an app), not syncing (signed out)"), "\(notes.all)")

        // The held store answers on its own control socket: a write, then the value read back.
        let write = WriteRequest(store: store.storeIdentifier, key: "color", value: .string("teal"), wait: 0, minimumPeers: 1)
        let written = try await ask(ControlRequest.write(write).line, at: ControlSocket.path(for: store, under: options.folders.controlSocketBase))
        #expect(try WriteOutcome(replyFields: written) == .local)
        #expect(notes.all.contains("set color for another hearth process; saved on this device (signed out: not synced)"), "\(notes.all)")
        let read = try await ask(ControlRequest.get(store: store.storeIdentifier, key: "color", json: true).line, at: ControlSocket.path(for: store, under: options.folders.controlSocketBase))
        #expect(read.string("text") == "\"teal\"")
        let live = try #require(try await LiveStatus.ask(store, socketBase: options.folders.controlSocketBase))
        #expect(live.pid == getpid() && live.figures.keys == 1)
        let held = try ControlRequest.fields(ofReply: try #require(await statusLine()))
        guard case .array(let stores)? = held["stores"], case .dictionary(let fields)? = stores.first else {
            Issue.record("the daemon lists no store: \(held.line)")
            await daemon.stop()
            return
        }
        #expect(stores.count == 1 && fields["store"] == .string("com.example.colors") && fields["file"] == .string(store.filePath))

        await daemon.stop()

        // The barrier: when stop() returns, nothing of the daemon is left to wait for.
        #expect(!FileManager.default.fileExists(atPath: DaemonControl.path(in: runtime)), "the daemon's socket is left behind")
        #expect(!FileManager.default.fileExists(atPath: ControlSocket.path(for: store, under: options.folders.controlSocketBase)), "the store's control socket is left behind")
        #expect(try await DaemonControl.askStatus(in: runtime, timeout: .seconds(1)) == .noListener)
        #expect(DaemonLock.runningPid(in: runtime) == nil)
        // The store saved and let go: its file has the write, and its lock is free.
        let access = StoreAccess(folders: options.folders, peering: PeerSettings(), storeIdentifier: store.storeIdentifier, identity: nil)
        #expect(try access.readReplica().entries[StoreKey("color")]?.value == .string("teal"))
        #expect((try? FileLock(path: store.lockPath)) != nil, "the store's file is still locked")

        // The lock is free: a second daemon starts at once, finds the store on disk and holds it.
        let next = try DeviceDaemon.start(options)
        #expect(try await DaemonControl.askToHold(store, runtimeDirectory: runtime))
        let again = try await ask(ControlRequest.get(store: store.storeIdentifier, key: "color", json: true).line, at: ControlSocket.path(for: store, under: options.folders.controlSocketBase))
        #expect(again.string("text") == "\"teal\"")
        // Every caller of stop() waits for the same stop.
        async let first: Void = next.stop()
        async let second: Void = next.stop()
        _ = await (first, second)
        #expect(!FileManager.default.fileExists(atPath: DaemonControl.path(in: runtime)))
        #expect(DaemonLock.runningPid(in: runtime) == nil)
    }

    @Test("A hold asked while the daemon stops ends at once, held or not, instead of running out its timeout")
    func holdDuringStop() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let daemon = try DeviceDaemon.start(options)
        await daemon.stop()
        let started = ContinuousClock.now
        #expect(await !daemon.hold("com.example.late", timeout: .seconds(30)))
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test("Signed in: a held store syncs on the device's port, and once stop() returns nothing listens there")
    func signedInStop() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        var folders = options.folders
        folders.caKeyScrypt = .testing
        let identity = try folders.accounts.createAccount(displayName: "Home", passphrase: "pw", deviceName: "lab")
        // A static peer nobody answers at: no Avahi, and the engine still listens for peers.
        let daemon = try DeviceDaemon.start(DaemonOptions(folders: folders, peering: PeerSettings(peers: ["127.0.0.1:9"], listenHost: "127.0.0.1"),
                                                          runtimeDirectory: runtime, rescanInterval: .seconds(3600), output: notes.output))
        let store = StoreLocation(dataDirectory: "\(root)/data", storeIdentifier: "com.example.notes", account: identity.account.id.hex)
        #expect(try await DaemonControl.askToHold(store, runtimeDirectory: runtime))
        let live = try #require(try await LiveStatus.ask(store, socketBase: options.folders.controlSocketBase))
        #expect(live.device == identity.deviceID.hex)
        let port = try #require(live.port, "the held store does not sync")
        #expect(Self.connects(to: port), "nothing listens on the store's sync port \(port)")

        await daemon.stop()
        #expect(!Self.connects(to: port), "the device's engine still listens on port \(port) after stop()")
        #expect(!FileManager.default.fileExists(atPath: ControlSocket.path(for: store, under: options.folders.controlSocketBase)))
        #expect((try? FileLock(path: store.lockPath)) != nil, "the store's file is still locked")
        #expect(DaemonLock.runningPid(in: runtime) == nil)
    }

    /// Whether a TCP connection to 127.0.0.1:`port` is accepted.
    private static func connects(to port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    private func statusLine() async throws -> String? {
        guard case .reply(let line) = try await DaemonControl.askStatus(in: runtime, timeout: .seconds(10)) else { return nil }
        return line
    }
}

/// Lines the daemon wrote, in order.
final class Lines: Sendable {
    private let lines = Locked<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    var output: DaemonOutput {
        DaemonOutput(note: { [lines] line in lines.withLock { $0.append(line) } }, emit: { [lines] line in lines.withLock { $0.append(line) } })
    }
}
