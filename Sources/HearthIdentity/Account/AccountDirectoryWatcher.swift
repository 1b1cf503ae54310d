import Foundation
import HearthCore

/// Tells every store of the process when an account directory's `current` pointer may have
/// changed (`hearth account …`, another app signing in or out), and every engine when an
/// account's `removals` file did (`hearth device remove`, a daemon that learned one): one
/// inotify watch and one thread per directory, asleep in `poll` while nothing changes.
///
/// Each store used to read the pointer once a second; a daemon holding 20 stores then woke 20
/// times a second for it, most of its idle CPU. Where inotify cannot watch the directory (it
/// does not exist yet, or inotify is unavailable) the thread reads the pointer once a second
/// for all the directory's stores. The thread ends once its directory has no subscriber.
package final class AccountDirectoryWatcher: Sendable {
    package static let shared = AccountDirectoryWatcher()

    private struct Subscriber {
        /// The file of the directory whose changes matter to this subscriber.
        let file: String
        let changed: @Sendable () -> Void
    }

    private struct Watch {
        var subscribers: [UInt64: Subscriber] = [:]
    }

    private let watches = Locked<[String: Watch]>([:])
    private let nextToken = Locked<UInt64>(0)

    /// Calls `changed` on the watcher's thread after each change of the directory's `file`
    /// (keep it short: start a task). Returns the token for ``unsubscribe(_:token:)``.
    package func subscribe(_ directory: String, file: String = "current", _ changed: @escaping @Sendable () -> Void) -> UInt64 {
        let token = nextToken.withLock { n in n &+= 1; return n }
        let start = watches.withLock { w -> Bool in
            let isNew = w[directory] == nil
            w[directory, default: Watch()].subscribers[token] = Subscriber(file: file, changed: changed)
            return isNew
        }
        if start {
            Thread.detachNewThread { [self] in watch(directory) }
        }
        return token
    }

    package func unsubscribe(_ directory: String, token: UInt64) {
        watches.withLock { w in _ = w[directory]?.subscribers.removeValue(forKey: token) }
    }

    /// The subscribers of `directory`, or nil once it has none (the watch is then forgotten:
    /// a later subscriber starts a new thread).
    private func subscribers(_ directory: String) -> [Subscriber]? {
        watches.withLock { w in
            guard let watch = w[directory], !watch.subscribers.isEmpty else {
                w[directory] = nil
                return nil
            }
            return Array(watch.subscribers.values)
        }
    }

    /// Tells the subscribers of `files` (every subscriber when nil). False once there are none.
    private func notify(_ directory: String, files: Set<String>? = nil) -> Bool {
        guard let subscribers = subscribers(directory) else { return false }
        for subscriber in subscribers where files?.contains(subscriber.file) ?? true { subscriber.changed() }
        return true
    }

    private enum End { case noSubscribers, cannotWatch }

    private func watch(_ directory: String) {
        while true {
            switch inotifyWatch(directory) {
            case .noSubscribers: return
            case .cannotWatch:
                // Once a second, for all the directory's stores at once, until it can be watched
                // (it exists again).
                repeat {
                    sleep(1)
                    guard notify(directory) else { return }
                } while !FileManager.default.fileExists(atPath: directory)
            }
        }
    }

    private func inotifyWatch(_ directory: String) -> End {
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        defer { if fd >= 0 { close(fd) } }
        let mask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)
        guard fd >= 0, inotify_add_watch(fd, directory, mask) >= 0 else { return .cannotWatch }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            // Woken by a change; otherwise once a minute, only to see whether anyone still listens.
            let ready = Glibc.poll(&descriptor, 1, 60_000)
            guard ready > 0 else {
                if ready < 0, errno != EINTR { return .cannotWatch }
                if subscribers(directory) == nil { return .noSubscribers }
                continue
            }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { continue }
            var files = Set<String>()
            var gone = false
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= n {
                let (mask, length) = buffer.withUnsafeBytes { raw in
                    (raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                     Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)))
                }
                let start = offset + MemoryLayout<inotify_event>.size
                let nameBytes = buffer[start..<min(start + length, n)].prefix { $0 != 0 }
                files.insert(String(decoding: nameBytes, as: UTF8.self))
                if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 { gone = true }
                offset = start + length
            }
            if gone {
                guard notify(directory) else { return .noSubscribers }
            } else if !notify(directory, files: files) {
                return .noSubscribers
            }
            if gone { return .cannotWatch }
        }
    }
}
