import Foundation
import Hearth
import HearthCore

/// Lets `hearth set` and `hearth rm` work while `hearth serve` or `hearth watch` holds the
/// store: the holder listens on a Unix socket, and a command that finds the store locked
/// sends it the write instead. One JSON request line, one JSON reply line.
///
/// The socket lives in `$TMPDIR/hearth-<uid>/` (mode 0700; socket 0600), named by a hash of
/// the store's lock file: a socket path must fit in 108 bytes, which store paths may not.
enum ControlSocket {
    /// The socket path for the store at `location`.
    static func path(for location: StoreLocation) -> String {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        // FNV-1a: stable across processes, unlike Hasher.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in location.lockPath.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return "\(base)/hearth-\(getuid())/\(String(hash, radix: 16)).sock"
    }

    /// Sends one request line and returns the reply line, or nil when no process listens.
    static func request(_ line: String, to path: String, timeout: Duration) -> String? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard var address = unixAddress(path) else { return nil }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { return nil }
        var limit = timeval(tv_sec: Int(timeout.components.seconds) + 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard writeAll(fd, Array((line + "\n").utf8)) else { return nil }
        return readLine(fd)
    }

    static func unixAddress(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in bytes.enumerated() { raw[i] = byte }
        }
        return address
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    /// Reads up to a newline (at most 4 MB: a value is at most 1 MB, even as base64 JSON).
    static func readLine(_ fd: Int32) -> String? {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while data.count < 4 << 20 {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return nil }
            data += buffer[0..<n]
            if let end = data.firstIndex(of: UInt8(ascii: "\n")) { return String(decoding: data[..<end], as: UTF8.self) }
        }
        return nil
    }
}

/// The holder's side: accepts requests on a thread of its own and answers each with `handler`.
final class ControlServer: Sendable {
    let path: String
    private let fd: Int32

    init?(path: String) {
        let directory = (path as NSString).deletingLastPathComponent
        mkdir(directory, 0o700)
        var info = stat()
        // Only a folder of ours that nobody else can enter: anyone who can connect can write.
        guard stat(directory, &info) == 0, info.st_uid == getuid(), info.st_mode & 0o077 == 0,
              var address = ControlSocket.unixAddress(path) else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        unlink(path)    // a socket left by a holder that was killed; we hold the store's lock now
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(path, 0o600) == 0, listen(fd, 16) == 0 else {
            close(fd)
            return nil
        }
        self.path = path
        self.fd = fd
    }

    func start(_ handler: @escaping @Sendable (String) async -> String) {
        let fd = self.fd
        Thread.detachNewThread {
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else {
                    if errno == EINTR { continue }
                    return      // stop() shut the socket down
                }
                Task {
                    defer { close(client) }
                    guard let line = ControlSocket.readLine(client) else { return }
                    let reply = await handler(line)
                    _ = ControlSocket.writeAll(client, Array((reply + "\n").utf8))
                }
            }
        }
    }

    func stop() {
        unlink(path)
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}
