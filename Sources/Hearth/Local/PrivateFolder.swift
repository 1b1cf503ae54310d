import Foundation

/// The one check of a folder that holds Hearth's local sockets and locks (the library's attach
/// sockets, the daemon's, the command's control sockets), and of the process behind a socket.
///
/// Whoever can create a socket in such a folder can pose as the store's holder, and whoever
/// can reach one can talk to it; `/tmp/hearth-<uid>` (the fallback without
/// `$XDG_RUNTIME_DIR`) can be made first by any user. So a folder is used only if it is a real
/// folder (not a symbolic link), owned by this user, mode 0700, and a client talks to a socket
/// only once the kernel says (`SO_PEERCRED`) that this user's process listens on it.
package enum PrivateFolder {
    /// Why a folder or socket must not be used: one sentence naming it, what is wrong and what
    /// to do.
    package struct Refusal: Error, CustomStringConvertible, Sendable {
        package let path: String
        package let description: String
    }

    /// What ``inspect(_:)`` found.
    package enum State: Equatable, Sendable {
        case missing
        case usable
        case refused(String)
    }

    /// Creates `directory` (mode 0700, whatever the umask) if it is missing, then checks it.
    package static func prepare(_ directory: String) throws(Refusal) {
        if mkdir(directory, 0o700) == 0 {
            // The umask may have taken bits away; 0700 exactly. Nobody else can have replaced
            // the entry meanwhile: it is ours in a sticky or private parent. Checked below anyway.
            _ = chmod(directory, 0o700)
        } else if errno != EEXIST {
            throw Refusal(path: directory, description: "cannot create \(directory): \(String(cString: strerror(errno)))")
        }
        try check(directory)
    }

    /// Throws unless `directory` exists and is usable.
    package static func check(_ directory: String) throws(Refusal) {
        switch inspect(directory) {
        case .usable: return
        case .missing: throw Refusal(path: directory, description: "\(directory) does not exist")
        case .refused(let reason): throw Refusal(path: directory, description: reason)
        }
    }

    /// Whether `directory` is missing, usable, or must not be used (and why). `lstat`: a
    /// symbolic link is refused, never followed.
    package static func inspect(_ directory: String) -> State {
        var info = stat()
        guard lstat(directory, &info) == 0 else {
            if errno == ENOENT { return .missing }
            return .refused("cannot inspect \(directory): \(String(cString: strerror(errno)))")
        }
        let me = geteuid()
        // The runtime folder follows XDG_RUNTIME_DIR, the command's control sockets TMPDIR.
        let advice = "Hearth keeps its sockets there and will not use it. Have an administrator remove \(directory), "
            + "or set XDG_RUNTIME_DIR and TMPDIR to folders of yours (a systemd-logind session sets XDG_RUNTIME_DIR=/run/user/\(me))"
        guard info.st_mode & S_IFMT == S_IFDIR else {
            let kind = info.st_mode & S_IFMT == S_IFLNK ? "a symbolic link" : "not a folder"
            return .refused("\(directory) is \(kind) (owner \(user(info.st_uid))), not a folder of yours. " + advice)
        }
        guard info.st_uid == me else {
            return .refused("\(directory) belongs to \(user(info.st_uid)), not to you, \(user(me)): another user made it, "
                            + "perhaps to catch what you send to Hearth. " + advice)
        }
        guard info.st_mode & 0o777 == 0o700 else {
            return .refused("\(directory) has mode \(String(info.st_mode & 0o777, radix: 8)), not 700: other users could reach "
                            + "Hearth's sockets in it, or it is not usable. Run chmod 700 \(directory)")
        }
        return .usable
    }

    /// Checks, right after `fd` connected to the Unix socket at `path` and before anything is
    /// sent, that a process of this user listens there (`SO_PEERCRED`).
    package static func checkServer(_ fd: Int32, at path: String) throws(Refusal) {
        guard let uid = peerUID(fd) else {
            throw Refusal(path: path, description: "cannot tell who listens on \(path) (SO_PEERCRED: \(String(cString: strerror(errno)))); nothing was sent")
        }
        guard uid == geteuid() else {
            throw Refusal(path: path, description: "\(path) is served by \(user(uid)), not by you, \(user(geteuid())); "
                          + "nothing was sent to it. Another user's process listens there: remove it")
        }
    }

    /// The uid of the process at the other end of the Unix socket `fd`, as the kernel recorded
    /// it at connect (or listen); nil if it cannot be read.
    package static func peerUID(_ fd: Int32) -> uid_t? {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }: Glibc's module leaves it out (it
        // needs _GNU_SOURCE), so its layout is spelled here.
        var credentials: (pid: pid_t, uid: uid_t, gid: gid_t) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0,
              length == socklen_t(MemoryLayout.size(ofValue: credentials)) else { return nil }
        return credentials.uid
    }

    /// "name (uid N)", or "uid N" when the name is unknown.
    static func user(_ uid: uid_t) -> String {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else {
            return "uid \(uid)"
        }
        return "\(String(cString: name)) (uid \(uid))"
    }
}
