import Foundation

/// The file operations a store's persistence is made of, so that a test or a simulator can put
/// a store on a disk of its own (HearthTesting's `SimulatedDisk`: writes lost at a crash unless
/// made durable, failures injected) while the product runs on the real one (``SystemDisk``).
///
/// The operations are the system calls' own, with their durability: a written file's bytes
/// survive a crash only once ``syncFile(_:)`` has returned, and a created, renamed or removed
/// name only once ``syncDirectory(of:)`` has. ``ReplicaStorage`` and ``replace(_:at:mode:)``
/// are written against these promises alone, so whatever a simulated disk shows of them holds
/// on the real one.
package protocol StoreDisk: Sendable {
    /// Whether other processes of this user see the disk's files. On the real disk a store asks
    /// the device daemon for it, attaches to the process that holds it and offers itself to the
    /// others (docs/local-attach.md); a simulated disk belongs to one process, so none of that
    /// happens on it.
    var isSharedWithOtherProcesses: Bool { get }

    /// The file's bytes, or `nil` when it does not exist.
    func read(_ path: String) throws(PersistenceError) -> Data?
    /// Creates `path` and its parents with permissions `mode` where missing.
    func createDirectory(_ path: String, mode: mode_t) throws(PersistenceError)
    /// Creates or truncates `path` and writes `data` into it, with permissions `mode` exactly.
    /// Not durable: a crash may leave the file empty or absent until ``syncFile(_:)``.
    func writeFile(_ data: Data, to path: String, mode: mode_t) throws(PersistenceError)
    /// Makes the bytes of `path` durable (`fsync`).
    func syncFile(_ path: String) throws(PersistenceError)
    /// Renames `source` over `target`, atomically. Durable once the directory is synced.
    func rename(_ source: String, to target: String) throws(PersistenceError)
    /// Makes the names in the directory holding `path` durable (`fsync` of the directory).
    func syncDirectory(of path: String) throws(PersistenceError)
    /// Removes the name `path` (`unlink`); whether there was one. Durable once the directory is synced.
    @discardableResult
    func remove(_ path: String) -> Bool
    /// Whether `path` names a file or directory.
    func fileExists(_ path: String) -> Bool
    /// The names in the directory `path` (empty if there is none).
    func contentsOfDirectory(_ path: String) -> [String]
    /// Takes the exclusive lock of `path`, or throws ``PersistenceError/Code/locked`` at once when
    /// another holder has it. The lock is held until the returned object is let go of, and a
    /// crash releases it (as the kernel releases a dead process's `flock`).
    func lock(_ path: String) throws(PersistenceError) -> any StoreDiskLock
}

/// A lock taken with ``StoreDisk/lock(_:)``: released when let go of.
package protocol StoreDiskLock: AnyObject, Sendable {}

extension StoreDisk {
    /// Replaces `path` with `data` atomically and durably: a temporary file beside it (same
    /// directory, so the rename is atomic) is written and synced, renamed over `path`, and the
    /// directory synced so the rename itself survives a power cut. A crash at any moment leaves
    /// either the old file or the new one, never a mixture; a failure leaves the old one.
    package func replace(_ data: Data, at path: String, mode: mode_t = 0o600) throws(PersistenceError) {
        let temporary = path + AtomicFile.temporaryMarker + String(getpid())
        do {
            try writeFile(data, to: temporary, mode: mode)
            try syncFile(temporary)
            try rename(temporary, to: path)
        } catch {
            remove(temporary)
            throw error
        }
        try syncDirectory(of: path)
    }
}

/// The real file system: the product's disk.
package struct SystemDisk: StoreDisk {
    package init() {}

    package var isSharedWithOtherProcesses: Bool { true }

    package func read(_ path: String) throws(PersistenceError) -> Data? { try AtomicFile.read(path) }

    package func createDirectory(_ path: String, mode: mode_t) throws(PersistenceError) {
        try AtomicFile.createDirectory(path, mode: mode)
    }

    package func writeFile(_ data: Data, to path: String, mode: mode_t) throws(PersistenceError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw .io("open", path: path) }
        defer { close(fd) }
        var failure: PersistenceError?
        data.withUnsafeBytes { raw in
            var written = 0
            while written < raw.count {
                let n = systemWrite(fd, raw.baseAddress! + written, raw.count - written)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = .io("write", path: path)
                    return
                }
                written += n
            }
        }
        if let failure { throw failure }
        // The umask may have narrowed `mode` at creation; state it exactly.
        guard fchmod(fd, mode) == 0 else { throw .io("fchmod", path: path) }
    }

    package func syncFile(_ path: String) throws(PersistenceError) {
        // fsync flushes the file (the inode), whichever descriptor names it; read-only, as the
        // files written here are their owner's to read (0600).
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .io("open", path: path) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .io("fsync", path: path) }
    }

    package func rename(_ source: String, to target: String) throws(PersistenceError) {
        guard systemRename(source, target) == 0 else { throw .io("rename", path: target) }
    }

    package func syncDirectory(of path: String) throws(PersistenceError) { try AtomicFile.syncDirectory(of: path) }

    @discardableResult
    package func remove(_ path: String) -> Bool { unlink(path) == 0 }

    package func fileExists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    package func contentsOfDirectory(_ path: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    }

    package func lock(_ path: String) throws(PersistenceError) -> any StoreDiskLock { try FileLock(path: path) }
}

extension FileLock: StoreDiskLock {}

#if canImport(Glibc)
import Glibc
private let systemWrite = Glibc.write
private let systemRename = Glibc.rename
#elseif canImport(Darwin)
import Darwin
private let systemWrite = Darwin.write
private let systemRename = Darwin.rename
#endif
