import Foundation

/// Where the local attach sockets live, and the checks made before one is used.
///
/// `$XDG_RUNTIME_DIR/hearth/` (the per-user runtime folder systemd-logind makes), or
/// `/tmp/hearth-<uid>/` when that is unset. The folder is created with mode 0700 and, before
/// every bind or connect, checked to be a real folder (not a symlink), owned by this user,
/// with mode 0700: another user must not be able to plant a socket we would talk to, nor
/// reach ours (``PrivateFolder``). The host checks each client's uid as well, and each client
/// the host's (`SO_PEERCRED`).
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

    /// Creates the folder if missing and checks it (``PrivateFolder``); throws why it must not be used.
    static func prepare(_ directory: String) throws(LocalAttachError) {
        do throws(PrivateFolder.Refusal) {
            try PrivateFolder.prepare(directory)
        } catch {
            throw LocalAttachError("the socket folder: \(error.description)")
        }
    }

    /// Checks that `directory` is a folder of ours, mode 0700, not a symlink (``PrivateFolder``).
    static func check(_ directory: String) throws(LocalAttachError) {
        do throws(PrivateFolder.Refusal) {
            try PrivateFolder.check(directory)
        } catch {
            throw LocalAttachError("the socket folder: \(error.description)")
        }
    }
}
