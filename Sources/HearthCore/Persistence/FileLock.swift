import Foundation

/// An exclusive, advisory lock on a lock file, held for the lifetime of the object.
///
/// `flock(2)` locks belong to the open file, so the kernel releases them when the process
/// dies, even by `SIGKILL`: a crashed app never leaves its store locked. The holder's pid
/// is written into the file so the error for a second process can name it.
package final class FileLock: Sendable {
    package let path: String
    private let fd: Int32

    /// Takes the lock, or throws ``PersistenceError/Code/locked`` at once if another open
    /// file holds it.
    package init(path: String) throws(PersistenceError) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .io("open lock file", path: path) }
        _ = fchmod(fd, 0o600)   // exactly, whatever the umask took away
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            var holder = [UInt8](repeating: 0, count: 32)
            let n = pread(fd, &holder, holder.count, 0)
            close(fd)
            if code == EWOULDBLOCK {
                let pid = n > 0 ? String(decoding: holder[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : "unknown"
                throw PersistenceError(.locked, path: path, reason: "locked by process \(pid)")
            }
            throw .io("flock", path: path, errno: code)
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, pid, pid.count, 0)
        self.path = path
        self.fd = fd
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
