import Foundation

/// Where the local attach sockets live, and the checks made before one is used.
///
/// `$XDG_RUNTIME_DIR/hearth/` (the per-user runtime folder systemd-logind makes), or
/// `/tmp/hearth-<uid>/` when that is unset. The folder is created with mode 0700 and, before
/// every bind or connect, checked to be a real folder (not a symlink), owned by this user,
/// with mode 0700: another user must not be able to plant a socket we would talk to, nor
/// reach ours. The host checks each client's uid as well (`SO_PEERCRED`).
package enum LocalSocketDirectory {
    /// The folder, from the environment (not yet created or checked).
    package static func path(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            let folder = (runtime as NSString).appendingPathComponent("hearth")
            // A socket's path must fit in sun_path (108 bytes with its NUL): a runtime folder too
            // deep for "store-<32 hex>.sock" falls back to /tmp, the same way on every side.
            if folder.utf8.count + longestSocketName <= 107 { return folder }
        }
        return "/tmp/hearth-\(geteuid())"
    }

    /// The address of the Unix socket at `path`; nil if the path does not fit in `sun_path`.
    /// Every local socket of Hearth (attach, the daemon's, the command's control sockets) is
    /// reached through it.
    package static func address(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in bytes.enumerated() { raw[i] = byte }
        }
        return address
    }

    /// "/store-" + 32 hex digits + ".sock".
    static let longestSocketName = 1 + 6 + 32 + 5

    /// The data directory as both sides compare it: absolute and without `.`, `..` or a
    /// trailing slash, so two spellings of one folder meet.
    static func normalized(_ dataDirectory: String) -> String {
        (dataDirectory as NSString).standardizingPath
    }

    /// The socket of the store `storeIdentifier` in `dataDirectory`, named by a 128-bit hash of
    /// both (two FNV-1a runs), so that different data directories do not meet and any path fits
    /// in `sun_path` (108 bytes). The hash needs no secrecy: a host checks the hello's data
    /// directory and store, so even a collision only refuses, never mixes two stores.
    package static func socketPath(dataDirectory: String, storeIdentifier: String,
                                   environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let name = Array(normalized(dataDirectory).utf8) + [0] + Array(storeIdentifier.utf8)
        func fnv1a(_ seed: UInt64) -> UInt64 {
            var hash = seed
            for byte in name {
                hash ^= UInt64(byte)
                hash = hash &* 0x100_0000_01b3
            }
            return hash
        }
        let digest = [fnv1a(0xcbf2_9ce4_8422_2325), fnv1a(0x6c62_272e_07bb_0142)].map { String(format: "%016llx", $0) }.joined()
        return (path(environment: environment) as NSString).appendingPathComponent("store-\(digest).sock")
    }

    /// Creates the folder if missing and checks it; throws why it must not be used.
    static func prepare(_ directory: String) throws(LocalAttachError) {
        if mkdir(directory, 0o700) != 0, errno != EEXIST {
            throw LocalAttachError("cannot create the socket folder \(directory): \(String(cString: strerror(errno)))")
        }
        try check(directory)
    }

    /// Checks that `directory` is a folder of ours, mode 0700, not a symlink.
    static func check(_ directory: String) throws(LocalAttachError) {
        var info = stat()
        guard lstat(directory, &info) == 0 else {
            throw LocalAttachError("cannot use the socket folder \(directory): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw LocalAttachError("the socket folder \(directory) is not a folder (a symlink?); not using it")
        }
        guard info.st_uid == geteuid() else {
            throw LocalAttachError("the socket folder \(directory) belongs to uid \(info.st_uid), not to this user (uid \(geteuid())); not using it")
        }
        guard info.st_mode & 0o777 == 0o700 else {
            throw LocalAttachError("the socket folder \(directory) has mode \(String(info.st_mode & 0o777, radix: 8)), not 700; not using it")
        }
    }
}
