import Foundation
import Hearth
import HearthCore

/// The Unix socket of the `hearth` process that holds a store (`serve`, `watch`): other
/// `hearth` commands that find the store locked send it their requests (``ControlRequest``)
/// instead. One JSON request line, one JSON reply line, one request per connection.
///
/// The socket lives in `<base>/hearth-<uid>/` (the command's `$TMPDIR`, else `/tmp`: ``DeviceFolders/controlSocketBase``; mode 0700, checked before every use; socket
/// 0600; each side checks the other's uid with `SO_PEERCRED`), named by a hash of the store's
/// lock file: a socket path must fit in 108 bytes, which store paths may not.
/// This type is only the transport; what is said over it is ``ControlRequest``.
package enum ControlSocket {
    /// The longest line either side accepts. A value is at most 1 MB of canonical encoding,
    /// and JSON can make that up to six times longer (a Boolean costs 1 byte and prints as
    /// `false,`; a control character in a string prints as `\u0001`), so 8 MB holds any
    /// request the store would accept, with room for its other fields.
    package static let maximumLineBytes = 8 << 20

    /// The socket path for the store at `location`, in `base`'s `hearth-<uid>/`.
    package static func path(for location: StoreLocation, under base: String) -> String {
        // FNV-1a: stable across processes, unlike Hasher.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in location.lockPath.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return "\(base)/hearth-\(geteuid())/\(String(hash, radix: 16)).sock"
    }

    /// How one request went.
    package enum Exchange: Sendable, Equatable {
        /// Nobody listens on the socket: nothing was sent.
        case noListener
        /// The request went out (perhaps partly), but no reply came before the connection
        /// closed or `timeout` passed: the holder may or may not have acted on it.
        case noReply
        case reply(String)
    }

    /// Sends one request line and waits up to `timeout` for the reply, on a thread of its own
    /// (the calls block; the cooperative pool must not). Throws, having sent nothing, if the
    /// socket's folder is not this user's private folder or another user's process listens on
    /// the socket (``PrivateFolder``): someone planted it to catch the request.
    package static func exchange(_ line: String, with path: String, timeout: Duration) async throws(CommandError) -> Exchange {
        let result = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: exchangeBlocking(line, with: path, timeout: timeout))
            }
        }
        return try result.get()
    }

    private static func exchangeBlocking(_ line: String, with path: String, timeout: Duration) -> Result<Exchange, CommandError> {
        // A folder of someone else's: whatever listens in it is not our holder.
        switch PrivateFolder.inspect((path as NSString).deletingLastPathComponent) {
        case .missing: return .success(.noListener)
        case .refused(let reason): return .failure(CommandError(.general, reason))
        case .usable: break
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0, var address = LocalSocketDirectory.address(path) else {
            if fd >= 0 { close(fd) }
            return .success(.noListener)
        }
        defer { close(fd) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { return .success(.noListener) }
        // The kernel's word on who listens, before a byte of the request goes out.
        do throws(PrivateFolder.Refusal) {
            try PrivateFolder.checkServer(fd, at: path)
        } catch {
            return .failure(CommandError(error))
        }
        // From here on the holder may have read some or all of the request.
        setTimeouts(fd, timeout)
        guard writeAll(fd, Array((line + "\n").utf8)), let reply = readLine(fd) else { return .success(.noReply) }
        return .success(.reply(reply))
    }

    package static func setTimeouts(_ fd: Int32, _ timeout: Duration) {
        let (seconds, attoseconds) = timeout.components
        var limit = timeval(tv_sec: Int(max(seconds, 0)), tv_usec: Int(max(attoseconds, 0) / 1_000_000_000_000))
        if limit.tv_sec == 0, limit.tv_usec == 0 { limit.tv_usec = 1000 }   // zero would mean "no limit"
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    package static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    /// Reads up to a newline, at most ``maximumLineBytes``; nil on end of file, error or timeout.
    package static func readLine(_ fd: Int32) -> String? {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while data.count <= maximumLineBytes {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return nil }
            // Only the new bytes can hold the newline: a long line is read in linear time.
            if let end = buffer[0..<n].firstIndex(of: UInt8(ascii: "\n")) {
                data += buffer[0..<end]
                return String(decoding: data, as: UTF8.self)
            }
            data += buffer[0..<n]
        }
        return nil
    }
}

/// The holder's side of ``ControlSocket``: accepts connections on a thread of its own, reads
/// each request on a thread per connection (a slow client must not hold up others, nor block
/// the cooperative pool), and answers with `handler`.
package final class ControlServer: Sendable {
    package let path: String
    private let fd: Int32
    /// Who owns `fd`: the server until ``start(_:)``, then the accepting thread, which closes
    /// it as it leaves. Closed while that thread could still call `accept`, the number would
    /// be handed to the next socket opened (the daemon opens one per store it holds) and the
    /// thread would answer that socket's clients with this handler.
    private let lifecycle = Locked(Lifecycle())
    private struct Lifecycle {
        var accepting = false
        var closed = false
        var stopped = false
    }
    private let connections = Locked(0)
    /// Clients are this user's own `hearth` commands; more at once than this is a runaway script.
    package static let maximumConnections = 64
    /// Where a refused connection is reported.
    private let note: @Sendable (String) -> Void

    /// Listens at `path`, creating its folder (0700) if needed; throws why not.
    package init(path: String, note: @escaping @Sendable (String) -> Void) throws(CommandError) {
        // Only a folder of ours that nobody else can enter: anyone who can connect can write.
        do throws(PrivateFolder.Refusal) {
            try PrivateFolder.prepare((path as NSString).deletingLastPathComponent)
        } catch {
            throw CommandError(error)
        }
        guard LocalSocketDirectory.address(path) != nil else { throw CommandError(.general, "socket path too long: \(path)") }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CommandError(.general, "socket: \(String(cString: strerror(errno)))") }
        // Bound under a name of its own and renamed into place once it listens (over a socket
        // left by a holder that was killed; we hold the store's lock now): a command woken by the
        // socket's appearance (``HolderWatch``) connects after the listen, never before it.
        let next = String(path.dropLast(5)) + ".next"   // as long as ".sock": fits where it does
        guard var nextAddress = LocalSocketDirectory.address(next) else { throw CommandError(.general, "socket path too long: \(path)") }
        unlink(next)
        let bound = withUnsafePointer(to: &nextAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(next, 0o600) == 0, listen(fd, 16) == 0, rename(next, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(next)
            close(fd)
            throw CommandError(.general, "cannot listen on \(path): \(reason)")
        }
        self.path = path
        self.fd = fd
        self.note = note
    }

    /// Accepts on a thread of its own until ``stop()``; does nothing once stopped.
    package func start(_ handler: @escaping @Sendable (String) async -> String) {
        let begins = lifecycle.withLock { state -> Bool in
            guard !state.stopped, !state.accepting else { return false }
            state.accepting = true
            return true
        }
        guard begins else { return }
        Thread.detachNewThread { [self] in
            // A descriptor kept in reserve: out of descriptors, it is let go to accept the waiting
            // client and close it at once (the client finds the connection closed, and says
            // so), instead of the listener spinning on EMFILE or ending for good.
            var spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
            defer {
                if spare >= 0 { close(spare) }
                // The descriptor is closed here, under the lock stop() shuts it down under, so
                // neither acts on a number the other has let go.
                lifecycle.withLock { state in
                    close(fd)
                    state.closed = true
                }
            }
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else {
                    let error = errno
                    if error == EINTR || error == ECONNABORTED { continue }
                    if lifecycle.withLock({ $0.stopped }) { return }     // stop() shut the socket down
                    if error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM, spare >= 0 {
                        close(spare)
                        let refused = accept(fd, nil, nil)
                        if refused >= 0 { close(refused) }
                        spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
                        note("refused a connection to \(path): \(String(cString: strerror(error)))")
                        continue
                    }
                    note("stopped accepting on \(path): \(String(cString: strerror(error)))")
                    return
                }
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                // The folder's mode keeps other users out; the kernel's word on who connected
                // is checked too, in case the folder was opened up by hand.
                guard Self.isOwnUser(client) else {
                    note("refused a connection to \(path) from another user")
                    close(client)
                    continue
                }
                let admitted = connections.withLock { count -> Bool in
                    guard count < Self.maximumConnections else { return false }
                    count += 1
                    return true
                }
                guard admitted else {
                    close(client)
                    continue
                }
                Thread.detachNewThread { [self] in
                    answer(client, handler)
                    connections.withLock { $0 -= 1 }
                }
            }
        }
    }

    private func answer(_ client: Int32, _ handler: @escaping @Sendable (String) async -> String) {
        defer { close(client) }
        // A client sends its line at once; one that stalls is dropped rather than waited for.
        ControlSocket.setTimeouts(client, .seconds(10))
        guard let line = ControlSocket.readLine(client) else { return }
        let reply = Locked<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let answer = await handler(line)
            reply.withLock { $0 = answer }
            done.signal()
        }
        done.wait()     // this thread is ours, not the pool's
        if let reply = reply.withLock({ $0 }) {
            _ = ControlSocket.writeAll(client, Array((reply + "\n").utf8))
        }
    }

    /// Whether the process at the other end of `client` runs as this user (SO_PEERCRED).
    package static func isOwnUser(_ client: Int32) -> Bool {
        PrivateFolder.peerUID(client) == geteuid()
    }

    /// Stops listening: the path is removed and the socket shut down at once (a client then
    /// finds no listener); the descriptor is closed by the accepting thread as it leaves, or
    /// here if ``start(_:)`` never ran. Calling it again does nothing.
    package func stop() {
        let stops = lifecycle.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.stopped = true
            if state.closed { return true }         // the accepting thread gave up on an error
            if state.accepting {
                shutdown(fd, Int32(SHUT_RDWR))     // wakes accept(), which then sees `stopped`
            } else {
                close(fd)
                state.closed = true
            }
            return true
        }
        if stops { unlink(path) }
    }
}
