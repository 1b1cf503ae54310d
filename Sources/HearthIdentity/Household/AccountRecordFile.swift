import Foundation
import HearthCore

/// A small binary property list in an account's directory that several processes of the user
/// update (the removals, the devices seen): read, merged and replaced under an exclusive
/// `flock` on `<file>.lock`, so that two processes saving at once never drop each other's
/// records. Called off the cooperative pool (it blocks on the lock and fsyncs).
struct AccountRecordFile: Sendable {
    let url: URL

    /// The document, nil when there is none; throws when it does not read.
    func read() throws -> PropertyListValue? {
        guard let bytes = try SecureFile.read(url) else { return nil }
        do {
            return try BinaryPropertyList.decode(Data(bytes))
        } catch {
            throw IdentityError(code: .damagedAccount, message: "\(url.path) is not a property list: \(error)")
        }
    }

    /// Replaces the document with `merge(what is on disk)` (nil when absent or unreadable),
    /// atomically and durably, under the lock.
    func update(_ merge: (PropertyListValue?) -> PropertyListValue) throws {
        try SecureFile.makeDirectory(url.deletingLastPathComponent())
        let lockPath = url.path + ".lock"
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw IdentityError.fileSystem("opening", path: lockPath) }
        _ = fchmod(fd, 0o600)   // exactly, whatever the umask took away
        defer { close(fd) }  // closing releases the lock
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw IdentityError.fileSystem("locking", path: lockPath) }
        }
        let merged = merge(try? read())
        try SecureFile.write(try BinaryPropertyList.encode(merged), to: url)
    }
}
