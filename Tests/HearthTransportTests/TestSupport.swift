import Foundation
import HearthIdentity
@testable import HearthTransport
import HearthCore
import HearthTestSupport
import HearthTesting
import Logging
import NIOCore
import Synchronization
import Testing

/// All transport tests run one at a time: the leak test counts the process's open file
/// descriptors, which concurrent connection tests would disturb.
@Suite("Transport", .serialized)
struct TransportTests {}

/// One household (account A) with a few devices, and a stranger household (B).
struct Household {
    let authority: AccountAuthority
    let server: DeviceIdentity
    let laptop: DeviceIdentity
    let stranger: DeviceIdentity

    init() throws {
        authority = try AccountAuthority.create(displayName: "Household A")
        server = try authority.makeDevice(named: "server")
        laptop = try authority.makeDevice(named: "laptop")
        stranger = try AccountAuthority.create(displayName: "Household B").makeDevice(named: "stranger")
    }
}

/// What the test server sends first on every accepted connection. A refused client must
/// never see it.
let greeting = "WELCOME-TO-HOUSEHOLD-A"

/// A listener that greets each authenticated peer and echoes every frame back.
final class EchoServer: Sendable {
    let listener: PeerListener
    let logs: LogCapture
    let task: Task<Void, Never>
    let state = ServerState()
    /// How each served connection ended: nil for a clean end, or the error.

    final class ServerState: Sendable {
        let outcomes = Mutex<[(DeviceID, (any Error)?)]>([])
        /// Signalled as each served connection ends (an outcome recorded).
        let ended = ChangeSignal()
        let framesReceived = Mutex<Int>(0)
    }

    var port: Int { listener.port! }

    init(identity: DeviceIdentity, logs: LogCapture = LogCapture(), echo: Bool = true, removals: DeviceRemovals? = nil,
         removalNotice: (@Sendable (DeviceID) -> [UInt8]?)? = nil) async throws {
        self.logs = logs
        let transport = try PeerTransport(configuration: TLSConfiguration(identity: identity, removals: removals, removalNotice: removalNotice,
                                                                          logger: logs.logger("server")))
        let listener = try await transport.listen(host: "127.0.0.1", port: 0)
        self.listener = listener
        let state = state
        task = Task {
            await withDiscardingTaskGroup { group in
                for await connection in listener.connections {
                    group.addTask {
                        do {
                            try await connection.executeThenClose { inbound, outbound in
                                try await outbound.write(ByteBuffer(string: greeting))
                                for try await frame in inbound {
                                    state.framesReceived.withLock { $0 += 1 }
                                    if echo { try await outbound.write(frame) }
                                }
                            }
                            state.outcomes.withLock { $0.append((connection.peer.deviceID, nil)) }
                        } catch {
                            state.outcomes.withLock { $0.append((connection.peer.deviceID, error)) }
                        }
                        state.ended.signal()
                    }
                }
            }
        }
    }

    func stop() async {
        await listener.close()
        await task.value
    }

    /// Waits for `count` served connections to end (woken as each one ends, not on a timer).
    func waitForOutcomes(_ count: Int, timeout: Duration = .seconds(10)) async -> [(DeviceID, (any Error)?)] {
        _ = await ChangeSignal.waitUntil(ContinuousClock.now + timeout, observing: { [state.ended] }) {
            state.outcomes.withLock { $0.count } >= count
        }
        return state.outcomes.withLock { $0 }
    }
}

func clientTransport(_ identity: DeviceIdentity, trustAnchor: Certificate? = nil, logs: LogCapture = LogCapture(),
                     maximumFrameLength: Int = Frame.maximumLength) throws -> PeerTransport {
    try PeerTransport(configuration: TLSConfiguration(identity: identity, trustAnchor: trustAnchor, logger: logs.logger("client")),
                      maximumFrameLength: maximumFrameLength)
}

/// Reads frames until the stream ends or fails, or `frames` have come; never hangs past `timeout`.
func drain(_ connection: PeerConnection, frames limit: Int = .max, timeout: Duration = .seconds(10)) async -> (frames: [String], error: (any Error)?) {
    await withTimeout(timeout) {
        var frames: [String] = []
        do {
            try await connection.executeThenClose { inbound, _ in
                for try await frame in inbound {
                    frames.append(String(buffer: frame))
                    if frames.count >= limit { break }
                }
            }
            return (frames, nil)
        } catch {
            return (frames, error)
        }
    } ?? ([], TimeoutError())
}

struct TimeoutError: Error {}

/// Runs `body`, or returns nil if it takes longer than `timeout` (then it is cancelled, and
/// waited for). The bound is `Task.bounded(by:)`'s (HearthTestSupport), not a timer of its own.
func withTimeout<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
    await Task { () async -> T? in
        let value = await body()
        return Task.isCancelled ? nil : value
    }.bounded(by: timeout).value
}

/// Writes PEM files for the openssl command-line tool.
struct PEMFiles {
    let directory: URL
    let certificate: URL
    let key: URL
    let ca: URL

    init(_ identity: DeviceIdentity) throws {
        directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("hearth-pem-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        certificate = directory.appendingPathComponent("device.pem")
        key = directory.appendingPathComponent("device.key")
        ca = directory.appendingPathComponent("ca.pem")
        try Data(identity.certificate.pemEncoded.utf8).write(to: certificate)
        try Data(identity.privateKey.pemRepresentation().utf8).write(to: key)
        try Data(identity.account.caCertificate.pemEncoded.utf8).write(to: ca)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

/// Runs `openssl` with `arguments`, stdin held open for `holdStdin`, and returns its
/// combined output and exit status. Killed after `timeout`.
func runOpenSSL(_ arguments: [String], holdStdin: Duration = .seconds(2), timeout: Duration = .seconds(15)) async throws -> (output: String, status: Int32) {
    try await runProcess("/usr/bin/openssl", arguments, holdStdin: holdStdin, timeout: timeout)
}

/// Runs `executable` with `arguments` (and `environment` added to ours), stdin held open for
/// `holdStdin`, and returns its combined output and exit status. Killed after `timeout`.
func runProcess(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                holdStdin: Duration = .zero, timeout: Duration) async throws -> (output: String, status: Int32) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let stdin = Pipe(), stdout = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    process.standardError = stdout
    try process.run()
    // Read on a thread of its own: a blocking read on one of the cooperative pool's threads
    // (two on this machine) starves every other test's tasks, including the server's, and one
    // on Dispatch's global queue (as wide as the cores) holds half of it for the child's life.
    let handle = stdout.fileHandleForReading
    let reader = Task {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: handle.readDataToEndOfFile()) }.start()
        }
    }
    // Keep stdin open a while: `openssl s_client` exits at EOF on stdin, and it must stay
    // long enough for the server's verdict to arrive. Both waits end when the process does
    // (its pidfd), the deadlines only bound them.
    let exit = ProcessExit(process.processIdentifier)
    if let exit, process.isRunning { _ = await exit.wait(until: ContinuousClock.now + holdStdin) }
    try? stdin.fileHandleForWriting.close()
    if let exit, process.isRunning { _ = await exit.wait(until: ContinuousClock.now + timeout) }
    if process.isRunning { process.terminate() }
    process.waitUntilExit()
    let output = await reader.value
    return (String(decoding: output, as: UTF8.self), process.terminationStatus)
}

/// A plain TCP client: connects, sends `bytes`, reads until EOF (or `timeout`).
func plainTCPExchange(port: Int, send bytes: [UInt8], timeout: TimeInterval = 5) throws -> (received: [UInt8], sawEOF: Bool) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    precondition(fd >= 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    precondition(connected == 0, "connect")
    var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var received: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 { received += chunk[0..<n]; continue }
        return (received, n == 0 || errno == ECONNRESET)
    }
}

/// Open sockets of this process: what a leaked connection would leave behind. (Counting every
/// descriptor would also count the timer and event descriptors the runtimes open lazily.)
func openSockets() -> Int {
    fileDescriptorTargets().values.filter { $0.hasPrefix("socket:") }.count
}

/// What each open file descriptor of this process refers to ("socket:[123]", a path, …).
func fileDescriptorTargets() -> [String: String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    var targets: [String: String] = [:]
    for name in names {
        targets[name] = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)")) ?? "?"
    }
    return targets
}

/// Resident set size in KiB.
func residentKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return -1 }
    return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? -1
}

/// Splits every outbound buffer into 1-byte writes, each flushed on its own: the peer
/// receives the stream in 1-byte TCP segments.
final class OneByteWriter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var buffer = unwrapOutboundIn(data)
        while buffer.readableBytes > 1 {
            context.write(wrapOutboundOut(buffer.readSlice(length: 1)!), promise: nil)
            context.flush()
        }
        context.write(wrapOutboundOut(buffer), promise: promise)
    }
}

/// Once it sees a `Cut` outbound event, swallows every later write: closing then ends the
/// TCP stream without close_notify, like a crashed peer.
final class Cutter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    struct Cut {}
    private var cut = false

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if cut {
            promise?.succeed()
        } else {
            context.write(data, promise: promise)
        }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if event is Cut {
            cut = true
            promise?.succeed()
        } else {
            context.triggerUserOutboundEvent(event, promise: promise)
        }
    }
}
