import Foundation

/// Whole-file reads and crash-safe whole-file replacement.
///
/// A write goes to a temporary file beside the target (same directory, so the rename is
/// atomic), which is flushed with `fsync`, renamed over the target, and then the directory
/// is flushed so the rename itself survives a power cut. A crash at any moment leaves
/// either the old file or the new one, never a mixture.
package enum AtomicFile {
    /// Suffix of temporary files; a leftover one is a write that was interrupted.
    package static let temporaryMarker = ".tmp-"

    /// Replaces `path` with `data`, with permissions `mode` (``StoreDisk/replace(_:at:mode:)``
    /// on the real disk: the one copy of the algorithm).
    package static func write(_ data: Data, to path: String, mode: mode_t = 0o600) throws(PersistenceError) {
        try SystemDisk().replace(data, at: path, mode: mode)
    }

    /// Flushes the directory holding `path`, so a rename or creation in it is durable.
    package static func syncDirectory(of path: String) throws(PersistenceError) {
        let directory = (path as NSString).deletingLastPathComponent
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .io("open directory", path: directory) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .io("fsync directory", path: directory) }
    }

    /// The file's bytes, or `nil` when it does not exist.
    package static func read(_ path: String) throws(PersistenceError) -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw .io("open", path: path)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .io("fstat", path: path) }
        var data = Data(count: Int(info.st_size))
        var failure: PersistenceError?
        let count = data.withUnsafeMutableBytes { raw -> Int in
            var total = 0
            while total < raw.count {
                let n = systemRead(fd, raw.baseAddress! + total, raw.count - total)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = .io("read", path: path)
                    return total
                }
                if n == 0 { break }
                total += n
            }
            return total
        }
        if let failure { throw failure }
        data.count = count
        return data
    }

    /// Creates `path` and its parents with permissions `mode` where missing.
    package static func createDirectory(_ path: String, mode: mode_t = 0o700) throws(PersistenceError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: Int(mode)])
        } catch {
            throw PersistenceError(.io, path: path, reason: "cannot create directory: \(error.localizedDescription)")
        }
    }
}

#if canImport(Glibc)
import Glibc
private let systemRead = Glibc.read
#elseif canImport(Darwin)
import Darwin
private let systemRead = Darwin.read
#endif
