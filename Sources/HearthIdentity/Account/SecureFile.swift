import Foundation

/// Files that hold secrets: created with mode 0600 in directories of mode 0700, replaced
/// atomically (temporary file, fsync, rename, fsync of the directory) so that a crash or
/// a concurrent reader never sees half a key or half a pointer.
package enum SecureFile {
    /// Writes `bytes` to `url`, replacing any file there atomically.
    ///
    /// With `scrubbingReplaced`, the file replaced (a key stored in the clear that is now
    /// stored encrypted) is overwritten with zeros once the new file is durable, unless another
    /// link keeps it: a best effort, since a copy-on-write file system, an SSD's remapping or
    /// a backup may keep the old bytes anyway. Never before the rename, so a crash cannot lose
    /// both versions.
    package static func write(_ bytes: some Collection<UInt8>, to url: URL, scrubbingReplaced: Bool = false) throws {
        // Opened before the rename, so it is the replaced file that gets scrubbed.
        let replaced = scrubbingReplaced ? open(url.path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW) : -1
        defer { if replaced >= 0 { close(replaced) } }
        try writeAtomically(bytes, to: url)
        if replaced >= 0 { scrub(replaced) }
    }

    /// Overwrites an unlinked regular file with zeros and syncs it.
    private static func scrub(_ fd: Int32) {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_nlink == 0, info.st_size > 0 else { return }
        let zeros = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < zeros.count {
            let n = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            done += n
        }
        _ = fsync(fd)
    }

    private static func writeAtomically(_ bytes: some Collection<UInt8>, to url: URL) throws {
        let bytes = Array(bytes)
        let directory = url.deletingLastPathComponent()
        try makeDirectory(directory)
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp")
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw IdentityError.fileSystem("creating", path: temporary.path) }
        var written = 0
        var failure: IdentityError?
        // fchmod as well: the umask can only remove bits, but be explicit about the mode.
        if fchmod(fd, 0o600) != 0 { failure = .fileSystem("chmod", path: temporary.path) }
        while failure == nil && written < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 {
                if errno == EINTR { continue }
                failure = .fileSystem("writing", path: temporary.path)
            } else {
                written += n
            }
        }
        if failure == nil && fsync(fd) != 0 { failure = .fileSystem("fsync", path: temporary.path) }
        close(fd)
        if failure == nil && rename(temporary.path, url.path) != 0 { failure = .fileSystem("renaming onto", path: url.path) }
        if let failure {
            unlink(temporary.path)
            throw failure
        }
        syncDirectory(directory)
    }

    /// Reads a whole file; nil when it does not exist.
    package static func read(_ url: URL) throws -> [UInt8]? {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw IdentityError.fileSystem("opening", path: url.path)
        }
        defer { close(fd) }
        var out = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw IdentityError.fileSystem("reading", path: url.path)
            }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
        }
        return out
    }

    /// Creates `url` and its parents with mode 0700 (existing directories keep their mode).
    package static func makeDirectory(_ url: URL) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue { return }
        try makeDirectory(url.deletingLastPathComponent())
        if mkdir(url.path, 0o700) == 0 {
            _ = chmod(url.path, 0o700)     // exactly, whatever the umask took away
        } else if errno != EEXIST {
            throw IdentityError.fileSystem("creating directory", path: url.path)
        }
    }

    /// Removes a file; a missing file is not an error.
    package static func remove(_ url: URL) throws {
        if unlink(url.path) != 0 && errno != ENOENT { throw IdentityError.fileSystem("removing", path: url.path) }
        syncDirectory(url.deletingLastPathComponent())
    }

    private static func syncDirectory(_ url: URL) {
        let fd = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}
