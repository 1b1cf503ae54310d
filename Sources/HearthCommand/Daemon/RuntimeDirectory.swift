import Foundation
import Hearth

/// This user's folder for the daemon's lock and sockets: `$XDG_RUNTIME_DIR/hearth` (systemd
/// makes `$XDG_RUNTIME_DIR` per user, 0700, on tmpfs), else `/tmp/hearth-<uid>`
/// (``LocalSocketDirectory``: the library's attach sockets live there too).
///
/// Whoever can write here can talk to the daemon, so the folder must be ours and closed to
/// everyone else: it is created 0700 and refused if it is a symbolic link, someone else's, or
/// open to others.
enum RuntimeDirectory {
    static func path(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        // The library's folder for its local sockets: apps find the daemon there.
        LocalSocketDirectory.path(environment: environment)
    }

    /// Creates the folder if needed and checks it; the path on success.
    static func prepare(environment: [String: String] = ProcessInfo.processInfo.environment) throws(CommandError) -> String {
        let path = path(environment: environment)
        if mkdir(path, 0o700) != 0, errno != EEXIST {
            throw CommandError(.general, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw CommandError(.general, "cannot inspect \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw CommandError(.general, "\(path) is not a folder (a symbolic link?); remove it and try again")
        }
        guard info.st_uid == getuid() else {
            throw CommandError(.general, "\(path) belongs to uid \(info.st_uid), not to us (\(getuid())); refusing to use it")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw CommandError(.general, "\(path) is open to other users (mode \(String(info.st_mode & 0o777, radix: 8))); "
                               + "refusing to use it (chmod 700 it)")
        }
        return path
    }
}
