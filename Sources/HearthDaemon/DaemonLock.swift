import Foundation

/// One daemon per user: the daemon holds an exclusive `flock` on `daemon.lock` in the
/// ``RuntimeDirectory`` for as long as it runs, and writes its pid there. The kernel drops
/// the lock when the process dies, however it dies, so a killed daemon never blocks the next.
package final class DaemonLock: Sendable {
    package let path: String
    private let fd: Int32

    package static func path(in directory: String) -> String { (directory as NSString).appendingPathComponent("daemon.lock") }

    /// Takes the lock, or fails with ``CommandError/Status/daemonRunning`` naming the holder.
    package static func acquire(in directory: String) throws(CommandError) -> DaemonLock {
        let path = path(in: directory)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw CommandError(.general, "cannot open \(path): \(String(cString: strerror(errno)))") }
        _ = fchmod(fd, 0o600)   // exactly, whatever the umask took away
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let error = errno
            close(fd)
            if error == EWOULDBLOCK {
                let holder = runningPid(in: directory).map { "pid \($0)" } ?? "another process"
                throw CommandError(.daemonRunning, "a Hearth daemon already runs for this user (\(holder), lock \(path)); "
                                   + "stop it first (hearth daemon uninstall, or kill it) or use hearth daemon status")
            }
            throw CommandError(.general, "cannot lock \(path): \(String(cString: strerror(error)))")
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return DaemonLock(path: path, fd: fd)
    }

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    /// The pid of the daemon that holds the lock now, or nil if none does.
    package static func runningPid(in directory: String) -> Int32? {
        let path = path(in: directory)
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // A shared lock we can take means nobody holds the exclusive one: no daemon.
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return nil
        }
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        return Int32(String(decoding: buffer[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Lets go (at a clean stop; a killed daemon's lock goes with its process).
    package func release() {
        _ = ftruncate(fd, 0)
        flock(fd, LOCK_UN)
        close(fd)
    }
}
