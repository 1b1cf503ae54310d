import Foundation
import HearthCore
import Logging

/// Tells every store of the process when an account directory's `current` pointer may have
/// changed (`hearth account …`, another app signing in or out), and every engine when an
/// account's `removals` file did (`hearth device remove`, a daemon that learned one).
///
/// One inotify instance and one thread serve a whole device (Hearth's `HearthDevice` owns one
/// and passes it in its ``AccountStore``s), asleep in `poll` while nothing changes: one watch
/// per directory, added on its first subscriber and removed with its last. (A thread and an
/// instance per directory ran into the kernel's 128 instances per user when many engines came
/// and went: each lived on up to a minute after its last subscriber.) ``stop()`` ends the
/// thread and closes the instance: a device that stops leaves nothing running behind.
///
/// Each store used to read the pointer once a second; a daemon holding 20 stores then woke 20
/// times a second for it, most of its idle CPU. Where inotify cannot watch a directory (it does
/// not exist yet, or inotify is unavailable) the thread tells that directory's subscribers once
/// a second, and watches it as soon as it can.
package final class AccountDirectoryWatcher: Sendable {
    private struct Subscriber {
        /// The file of the directory whose changes matter to this subscriber.
        let file: String
        let changed: @Sendable () -> Void
    }

    private struct Directory {
        var subscribers: [UInt64: Subscriber] = [:]
        /// The inotify watch, or nil while the directory cannot be watched (it is then polled).
        var watch: Int32?
    }

    private struct State {
        var directories: [String: Directory] = [:]
        /// Two paths to one directory share a watch descriptor: it is removed with the last.
        var paths: [Int32: Set<String>] = [:]
        var nextToken: UInt64 = 0
        var threadStarted = false
        /// Set by ``stop()``: the thread ends, and no subscription is taken any more.
        var stopped = false
        /// Whether the thread is in its loop (it clears this as it leaves).
        var threadRunning = false
        /// ``stop()`` calls waiting for the thread to end.
        var endWaiters: [CheckedContinuation<Void, Never>] = []
        /// Whether the descriptors were closed (once, by ``stop()``).
        var closed = false

        var polled: [String] { directories.compactMap { $0.value.watch == nil ? $0.key : nil } }
        var anyPolled: Bool { directories.values.contains { $0.watch == nil } }
    }

    private let state = Locked(State())
    /// The inotify instance, or -1 where there is none (every directory is then polled).
    private let inotify: Int32
    /// A pipe that wakes the thread when a directory that must be polled is added while it
    /// sleeps: the thread reads its first descriptor, `wake()` writes the second.
    private let wakeup: (read: Int32, write: Int32)

    private let logger: Logger

    private static let mask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE
        | IN_DELETE_SELF | IN_MOVE_SELF)

    /// A watcher with its own inotify instance; its thread starts with the first subscriber.
    package init(logger: Logger) {
        self.logger = logger
        inotify = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        wakeup = WakePipe.make()
    }

    /// Calls `changed` on the watcher's thread after each change of the directory's `file`
    /// (keep it short: start a task). Returns the token for ``unsubscribe(_:token:)``.
    package func subscribe(_ directory: String, file: String = "current", _ changed: @escaping @Sendable () -> Void) -> UInt64 {
        let (token, startThread, isPolled, stopped) = state.withLock { s -> (UInt64, Bool, Bool, Bool) in
            s.nextToken &+= 1
            let token = s.nextToken
            guard !s.stopped else { return (token, false, false, true) }
            if s.directories[directory] == nil {
                // Under the lock, so that the thread never sees a descriptor it cannot name.
                let watch = addWatch(directory)
                s.directories[directory] = Directory(watch: watch)
                if let watch { s.paths[watch, default: []].insert(directory) }
            }
            s.directories[directory]!.subscribers[token] = Subscriber(file: file, changed: changed)
            let start = !s.threadStarted
            s.threadStarted = true
            if start { s.threadRunning = true }
            return (token, start, s.directories[directory]!.watch == nil, false)
        }
        if stopped {
            logger.warning("the device has stopped: changes of \(directory)/\(file) are no longer followed")
        } else if startThread {
            Thread.detachNewThread { [self] in run() }
        } else if isPolled {
            wake()
        }
        return token
    }

    package func unsubscribe(_ directory: String, token: UInt64) {
        state.withLock { s in
            guard var entry = s.directories[directory] else { return }
            entry.subscribers[token] = nil
            guard entry.subscribers.isEmpty else {
                s.directories[directory] = entry
                return
            }
            s.directories[directory] = nil
            if let watch = entry.watch { release(watch, of: directory, in: &s) }
        }
    }

    private func addWatch(_ directory: String) -> Int32? {
        guard inotify >= 0 else { return nil }
        let watch = inotify_add_watch(inotify, directory, Self.mask)
        return watch >= 0 ? watch : nil
    }

    /// Forgets `directory`'s use of `watch`, and removes the watch once no path uses it.
    private func release(_ watch: Int32, of directory: String, in s: inout State) {
        s.paths[watch]?.remove(directory)
        if s.paths[watch]?.isEmpty ?? false {
            s.paths[watch] = nil
            inotify_rm_watch(inotify, watch)
        }
    }

    private func wake() {
        guard wakeup.write >= 0 else { return }
        var one: UInt8 = 1
        _ = write(wakeup.write, &one, 1)
    }

    /// The thread: reads inotify events, and once a second while some directory cannot be
    /// watched, tells its subscribers and tries to watch it again.
    private func run() {
        var buffer = [UInt8](repeating: 0, count: 8192)
        var descriptors = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wakeup.read, events: Int16(POLLIN), revents: 0)]
        while true {
            let (anyPolled, stopped) = state.withLock { ($0.anyPolled, $0.stopped) }
            if stopped { return threadEnded() }
            let ready = Glibc.poll(&descriptors, nfds_t(descriptors.count), anyPolled ? 1_000 : -1)
            if ready < 0, errno != EINTR {
                // Not expected (EFAULT, EINVAL, ENOMEM): the thread ends rather than spin or
                // sleep; the next subscriber starts a new one, and everyone checks once now.
                stopAfterFailure(errno)
                return
            }
            if descriptors[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                _ = read(wakeup.read, &drain, drain.count)
            }
            if descriptors[0].revents != 0 {
                let n = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
                if n > 0 { dispatch(buffer, count: n) }
            }
            if ready == 0 { pollUnwatched() }
        }
    }

    /// Ends the thread and closes the inotify instance: a barrier (once it returns, no
    /// subscriber is called any more and the thread has left its loop). Later subscriptions
    /// are refused with a warning. Idempotent.
    package func stop() async {
        let running = state.withLock { s -> Bool in
            s.stopped = true
            s.directories = [:]
            s.paths = [:]
            return s.threadRunning
        }
        if running {
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let ended = state.withLock { s -> Bool in
                    guard s.threadRunning else { return true }
                    s.endWaiters.append(waiter)
                    return false
                }
                if ended { waiter.resume() } else { wake() }
            }
        }
        // The thread is out of `poll` and `read`: the descriptors may go.
        let close = state.withLock { s -> Bool in
            defer { s.closed = true }
            return !s.closed
        }
        guard close else { return }
        for descriptor in [inotify, wakeup.read, wakeup.write] where descriptor >= 0 { Glibc.close(descriptor) }
    }

    /// Whether the watcher's thread is running (tests: ``stop()`` ends it).
    package var isThreadRunning: Bool { state.withLock(\.threadRunning) }

    /// The thread leaves its loop (``stop()``): it tells the waiting stops, last.
    private func threadEnded() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.threadRunning = false
            s.threadStarted = false
            defer { s.endWaiters = [] }
            return s.endWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The thread's `poll` failed: logged; every subscriber is told once (a change may go
    /// unseen from now on), and the next ``subscribe(_:file:_:)`` starts the thread again.
    private func stopAfterFailure(_ code: Int32) {
        let calls = state.withLock { s -> [@Sendable () -> Void] in
            s.threadStarted = false
            return s.directories.values.flatMap { $0.subscribers.values.map(\.changed) }
        }
        threadEnded()
        logger.error("the account directory watcher stopped: poll failed (\(String(cString: strerror(code)))); changes of the account directory are noticed again once a store subscribes anew")
        for call in calls { call() }
    }

    /// Tells each subscriber whose file one of the events names; everyone of a directory whose
    /// watch ended (the directory was removed or moved), and everyone when events were lost.
    private func dispatch(_ buffer: [UInt8], count n: Int) {
        var changed: [String: Set<String>] = [:]
        var all: Set<String> = []
        var everyone = false
        let events = InotifyEvent.parse(buffer, count: n)
        let calls: [@Sendable () -> Void] = state.withLock { s in
            for event in events {
                let (watch, mask, name) = (event.watch, event.mask, event.name)
                if mask & UInt32(IN_Q_OVERFLOW) != 0 { everyone = true }
                guard let directories = s.paths[watch] else { continue }
                if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 {
                    // The watch is gone with the directory: poll it until it is back.
                    s.paths[watch] = nil
                    if mask & UInt32(IN_IGNORED) == 0 { inotify_rm_watch(inotify, watch) }
                    for directory in directories {
                        s.directories[directory]?.watch = nil
                        all.insert(directory)
                    }
                } else {
                    for directory in directories { changed[directory, default: []].insert(name) }
                }
            }
            var calls: [@Sendable () -> Void] = []
            for (path, directory) in s.directories {
                let files = changed[path]
                for subscriber in directory.subscribers.values
                where everyone || all.contains(path) || files?.contains(subscriber.file) ?? false {
                    calls.append(subscriber.changed)
                }
            }
            return calls
        }
        // Outside the lock: a subscriber may subscribe or unsubscribe.
        for call in calls { call() }
    }

    /// Once a second for each directory that cannot be watched: tells its subscribers (the
    /// file may have changed unseen), then watches it if it exists again.
    private func pollUnwatched() {
        let calls: [@Sendable () -> Void] = state.withLock { s in
            var calls: [@Sendable () -> Void] = []
            for path in s.polled {
                calls += s.directories[path]!.subscribers.values.map(\.changed)
                if let watch = addWatch(path) {
                    s.directories[path]!.watch = watch
                    s.paths[watch, default: []].insert(path)
                }
            }
            return calls
        }
        for call in calls { call() }
    }
}
