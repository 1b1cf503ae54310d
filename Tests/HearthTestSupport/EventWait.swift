import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// Waits on events the kernel reports (a descriptor readable, a file written, a process
/// ended), never on a timer: each deadline here is only a bound for a failure.

/// Whether `descriptor` became readable (or hung up) before `deadline`. The `poll` runs on a
/// thread of its own, so a long wait blocks neither the cooperative pool nor an event loop.
public func waitReadable(_ descriptor: Int32, until deadline: ContinuousClock.Instant) async -> Bool {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: pollReadable(descriptor, until: deadline)) }
    }
}

/// ``waitReadable(_:until:)`` for synchronous code (a `deinit`, a `defer`): blocks this thread.
public func pollReadable(_ descriptor: Int32, until deadline: ContinuousClock.Instant) -> Bool {
    while true {
        let left = ContinuousClock.now.duration(to: deadline)
        let milliseconds = left <= .zero ? 0 : Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let ready = poll(&entry, 1, milliseconds)
        if ready > 0 { return true }
        if ready == 0 || errno != EINTR { return false }
    }
}

/// Waits until `condition` holds, checking it now and again each time one of `paths` (files or
/// directories; a directory reports its entries) is created, written, closed, moved, removed or
/// changes attributes (inotify); false if it does not hold by `deadline`, a bound for a failure
/// (a condition first seen true at the deadline fails too: no event announced it). With `names`, only
/// events on entries whose name it accepts count (say, a store's file saved, not the lock files
/// a check itself touches).
///
/// ```swift
/// #expect(await untilFilesChange(["\(data)"], "the peer's snapshot to hold the write") { snapshot["k"] != nil })
/// ```
///
/// With `what`, a timeout also records a test issue naming it.
@discardableResult
public func untilFilesChange(_ paths: [String], _ what: String? = nil, names: ((String) -> Bool)? = nil, deadline: Duration = .seconds(30),
                             sourceLocation: SourceLocation = #_sourceLocation,
                             _ condition: () async throws -> Bool) async rethrows -> Bool {
    let watch = FileWatch(paths)
    let end = ContinuousClock.now + deadline
    while try await !condition() {
        var woken = false
        while !woken {
            guard let watch, ContinuousClock.now < end, await waitReadable(watch.descriptor, until: end) else {
                // Not checked once more: a condition that became true with no event announcing
                // it is a missing event (a folder not watched), not a pass by timing.
                if let what { Issue.record("timed out after \(deadline) waiting for \(what)", sourceLocation: sourceLocation) }
                return false
            }
            woken = watch.drain(names: names)
        }
    }
    return true
}

/// Waits until none of `paths` has changed for `quiet` (each change, seen through inotify,
/// starts the window again); false if no such window ends by `deadline`. The window is the
/// absence being measured, not a guess at how long something takes.
public func untilQuiet(_ paths: [String], for quiet: Duration, deadline: Duration) async -> Bool {
    guard let watch = FileWatch(paths) else { return false }
    let end = ContinuousClock.now + deadline
    while true {
        let windowEnd = ContinuousClock.now + quiet
        guard windowEnd <= end else { return false }
        if await !waitReadable(watch.descriptor, until: windowEnd) { return true }
        _ = watch.drain()
    }
}

/// An inotify instance watching some paths, closed with this object. A directory is watched
/// with every folder below it (inotify reports one level; a store's file may sit in an account's
/// subfolder), new ones included. A path that does not exist yet is watched through its nearest
/// existing ancestor, and itself once it appears (a data folder a child process makes).
final class FileWatch {
    let descriptor: Int32
    private var missing: [String]
    private var roots: [String] = []
    private var watched: Set<String> = []
    private static let mask = UInt32(IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_ATTRIB)

    /// nil if inotify cannot be had (then a wait fails after its first check, saying why).
    init?(_ paths: [String]) {
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else {
            FileHandle.standardError.write(Data("inotify_init1 failed: errno \(errno)\n".utf8))
            return nil
        }
        missing = paths
        watchWhatExists()
    }

    deinit { close(descriptor) }

    private func watch(_ path: String) -> Bool {
        if watched.contains(path) { return true }
        guard inotify_add_watch(descriptor, path, Self.mask) >= 0 else { return false }
        watched.insert(path)
        return true
    }

    /// Watches each path that exists now (a directory with its subfolders); for one that does
    /// not, its nearest existing ancestor.
    private func watchWhatExists() {
        missing = missing.filter { path in
            if watch(path) {
                roots.append(path)
                return false
            }
            var ancestor = (path as NSString).deletingLastPathComponent
            while !ancestor.isEmpty, ancestor != "/", !watch(ancestor) { ancestor = (ancestor as NSString).deletingLastPathComponent }
            // Made just before its ancestor was watched: no event will say so, so look again.
            if watch(path) {
                roots.append(path)
                return false
            }
            return true
        }
        for root in roots { watchSubfolders(of: root) }
    }

    /// Watches every folder below `root` not watched yet.
    private func watchSubfolders(of root: String) {
        guard let entries = FileManager.default.enumerator(atPath: root) else { return }
        for case let entry as String in entries {
            let path = "\(root)/\(entry)"
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { _ = watch(path) }
        }
    }

    /// Reads the pending events and watches the paths that have appeared since; returns whether
    /// an event counts (any, without `names`; else one on an entry whose name `names` accepts).
    func drain(names: ((String) -> Bool)? = nil) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var counts = false
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else { break }
            var offset = 0
            // struct inotify_event: wd, mask, cookie, len (4 bytes each), then len bytes of name.
            while offset + 16 <= count {
                let length = Int(buffer[offset + 12 ..< offset + 16].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
                let nameBytes = buffer[(offset + 16) ..< min(offset + 16 + length, count)].prefix { $0 != 0 }
                if let names { counts = counts || names(String(decoding: nameBytes, as: UTF8.self)) } else { counts = true }
                offset += 16 + length
            }
        }
        watchWhatExists()   // folders made since, and paths that have appeared
        return counts
    }
}

/// A process's pidfd (Linux 5.3, glibc 2.36): readable once the process has ended, so its exit
/// is an event to wait on. Closed with this object.
public final class ProcessExit {
    /// glibc's `pidfd_open`, which Swift's Glibc module does not import.
    private static let pidfdOpen: (@convention(c) (pid_t, UInt32) -> Int32)? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "pidfd_open") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (pid_t, UInt32) -> Int32).self)
    }()

    let descriptor: Int32

    /// nil if the pidfd cannot be had (the process is already reaped, or no pidfd_open).
    public init?(_ pid: pid_t) {
        guard let open = Self.pidfdOpen else { return nil }
        descriptor = open(pid, 0)
        guard descriptor >= 0 else { return nil }
    }

    deinit { close(descriptor) }

    /// Whether the process ended before `deadline` (it is not reaped: its parent does that).
    public func wait(until deadline: ContinuousClock.Instant) async -> Bool {
        await waitReadable(descriptor, until: deadline)
    }

    /// ``wait(until:)`` for synchronous code: blocks this thread.
    public func block(until deadline: ContinuousClock.Instant) -> Bool {
        pollReadable(descriptor, until: deadline)
    }
}

extension Task {
    /// Cancels this task if it has not ended once `bound` has passed: the bound of a wait that
    /// ends on its own event (a notification, a stream's element, a process's exit), so that a
    /// missing event fails the test instead of hanging it. Returns the task, to await.
    ///
    /// ```swift
    /// let first = Task { for await change in changes { return change }; return nil }.bounded(by: .seconds(10))
    /// #expect(await first.value == ChangeEvent(reason: .serverChange, keys: ["greeting"]))
    /// ```
    @discardableResult
    public func bounded(by bound: Duration) -> Self {
        Task<Void, Never> { [self] in
            try? await Task<Never, Never>.sleep(for: bound)
            cancel()
        }
        return self
    }
}

/// The file Foundation on Linux keeps the defaults suite `suite` in
/// (`$XDG_CONFIG_HOME/<suite>.plist`, else `~/.config/<suite>.plist`): it posts no
/// `UserDefaults.didChangeNotification` for another instance's writes, but
/// `synchronize()` writes this file, an event ``untilFilesChange`` can wait on.
public func defaultsFile(ofSuite suite: String) -> String {
    let environment = ProcessInfo.processInfo.environment
    let home = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory() + "/.config"
    return "\(home)/\(suite).plist"
}
