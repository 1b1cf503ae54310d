import Foundation
import Hearth

/// This user's folder for the daemon's lock and sockets: `$XDG_RUNTIME_DIR/hearth` (systemd
/// makes `$XDG_RUNTIME_DIR` per user, 0700, on tmpfs), else `/tmp/hearth-<uid>`
/// (``LocalSocketDirectory``: the library's attach sockets live there too).
///
/// Whoever can write here can talk to the daemon, and whoever made it can pose as the daemon,
/// so the folder must be ours and closed to everyone else: it is created 0700 and refused if
/// it is a symbolic link, someone else's, or open to others (``PrivateFolder``, the library's
/// check too).
package enum RuntimeDirectory {
    package static func path(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        // The library's folder for its local sockets: apps find the daemon there.
        LocalSocketDirectory.path(environment: environment)
    }

    /// Creates the folder at `path` if needed and checks it (``PrivateFolder``).
    package static func prepare(_ path: String) throws(CommandError) {
        do throws(PrivateFolder.Refusal) {
            try PrivateFolder.prepare(path)
        } catch {
            throw CommandError(error)
        }
    }

    /// For a client: false if the folder does not exist (nothing listens there), true if it is
    /// usable; throws if it is not ours to use (squatted, open to others, a symbolic link).
    package static func existsAndIsOurs(_ path: String) throws(CommandError) -> Bool {
        switch PrivateFolder.inspect(path) {
        case .missing: false
        case .usable: true
        case .refused(let reason): throw CommandError(.general, reason)
        }
    }
}

extension CommandError {
    /// A runtime folder or socket that must not be used: a general failure, saying why.
    package init(_ refusal: PrivateFolder.Refusal) {
        self.init(.general, refusal.description)
    }
}
