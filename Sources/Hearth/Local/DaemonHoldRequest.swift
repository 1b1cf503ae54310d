import Foundation

/// Asks this user's device daemon (`hearth daemon`, docs/daemon.md), if one runs, to hold a
/// store before this process opens it: the daemon then owns and syncs the store, and this
/// process attaches to it (`.automatic`), so the store keeps syncing after the app quits and
/// the device keeps one engine. Without a daemon nothing happens and the store opens as before.
///
/// One JSON line to `daemon.sock` in ``LocalSocketDirectory``, one line back:
/// `{"op":"hold","store":S,"dataDirectory":D}` → `{"status":0,"held":true}`.
enum DaemonHoldRequest {
    static let socketName = "daemon.sock"

    /// True if the daemon holds the store now. Blocks up to `timeout` (called where a store
    /// opens, which may block on its file anyway; never on the cooperative pool's account).
    static func ask(storeIdentifier: String, dataDirectory: String, timeout: TimeInterval = 6) -> Bool {
        let directory = LocalSocketDirectory.path()
        guard (try? LocalSocketDirectory.check(directory)) != nil else { return false }
        let path = (directory as NSString).appendingPathComponent(socketName)
        guard FileManager.default.fileExists(atPath: path) else { return false }
        guard var address = LocalSocketDirectory.address(path) else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { return false }     // a socket left by a daemon that died
        // Only to this user's daemon: the request names the store and the data directory.
        guard (try? PrivateFolder.checkServer(fd, at: path)) != nil else { return false }
        let request = Array("{\"op\":\"hold\",\"store\":\(quote(storeIdentifier)),\"dataDirectory\":\(quote(dataDirectory))}\n".utf8)
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return false }
            sent += n
        }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while !reply.contains(UInt8(ascii: "\n")), reply.count < 4096 {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            reply += buffer[0..<n]
        }
        return String(decoding: reply, as: UTF8.self).contains("\"held\":true")
    }

    /// A JSON string literal.
    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
