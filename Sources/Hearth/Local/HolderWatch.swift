import Dispatch
import Foundation
import HearthCore

/// Waits, on the calling thread, for a change that may let this process open, or attach to, a
/// store another process holds: the host's socket appearing or going away (or the daemon's),
/// the store's lock being let go, or the process holding it exiting. Not a sleep: the thread
/// sleeps in `poll(2)` until one of these happens or the deadline passes
/// (docs/local-attach.md, "Waiting for the holder").
///
/// - The socket folder is watched with inotify for the store's socket and `daemon.sock`
///   (created, renamed into place, removed). A host renames its socket into place once it
///   listens (``StoreHost``), so a connect after the event is not refused.
/// - The lock file is watched for `IN_CLOSE_WRITE` (a holder releases it with `LOCK_UN`, then
///   closes it: the lock is free before the event) and `IN_MODIFY` (a new holder wrote its pid).
/// - The holder's exit, through a pidfd of the pid it wrote into the lock file: the kernel
///   drops a dead process's `flock` before the pidfd becomes readable, so the try that follows
///   finds it free. (An `IN_CLOSE_WRITE` made by the kernel closing a killed host's files comes
///   just before the lock is dropped, so it alone could leave a waiter asleep on a held lock.)
///
/// `hearth`'s own waits (HearthDaemon: a write waiting for the store's holder, `serve` for its
/// lock) watch the command's control socket's folder too, and wait off the cooperative pool
/// (``wait(until:)`` async).
///
/// Where one of these cannot be watched (no inotify instance left, the socket folder missing,
/// no pidfd for the holder), the wait re-checks at least once a second.
///
/// Made before the try whose failure it waits after, so that nothing in between is lost; kept
/// for the tries that follow. While the lock is held, the caller does not try to open the
/// file (``lockIsHeld``): a failed open closes the lock file, an event that would wake every
/// waiter, this one included, again and again.
package final class HolderWatch: Sendable {
    package let lockPath: String?
    private let inotify: Int32
    /// For each watched socket folder (its inotify watch), the names in it whose events matter.
    private let names: [Int32: Set<String>]
    /// One of the socket folders could not be watched (no inotify instance, the folder missing).
    private let socketsBlind: Bool
    private let lockWatch: Int32
    /// A read-only descriptor of the lock file, for ``lockIsHeld`` and the holder's pid (closing
    /// a read-only descriptor makes no `IN_CLOSE_WRITE`), or -1.
    private let probe: Int32
    /// ``wake()`` writes to the second descriptor; the wait reads the first.
    private let wakeup: (read: Int32, write: Int32)
    /// The last holder seen to exit: not watched again (a zombie's pidfd stays readable, and a
    /// new holder may not have written its pid yet).
    private let exited = Locked<pid_t>(0)
    /// How many waits have gone to sleep (for tests: what a wait sleeps on is armed by then).
    private let sleeps = Locked(0)
    package var sleepCount: Int { sleeps.withLock { $0 } }
    /// Signalled each time a wait goes to sleep (its events armed): a test's event for "the
    /// waiter is asleep on the holder now", to act then instead of after a guessed pause.
    private let asleep: ChangeSignal?

    /// How long a wait lasts at most (milliseconds) where no event can say that something changed.
    private let blindInterval: Int

    /// Watches the folder of `socketPath` (that socket and the daemon's) and, when given, the
    /// lock file at `lockPath`. `blindInterval`: see the type (tests lengthen it).
    package convenience init(socketPath: String, lockPath: String?, blindInterval: Int = 1_000) {
        self.init(socketPaths: [socketPath], lockPath: lockPath, blindInterval: blindInterval)
    }

    /// Watches the folders of `socketPaths` (each of those sockets, and the daemon's) and, when
    /// given, the lock file at `lockPath`. `asleep`: signalled as each wait goes to sleep.
    package init(socketPaths: [String], lockPath: String?, blindInterval: Int = 1_000, asleep: ChangeSignal? = nil) {
        self.lockPath = lockPath
        self.blindInterval = blindInterval
        self.asleep = asleep
        inotify = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        var names: [Int32: Set<String>] = [:]
        var socketsBlind = false
        for socketPath in socketPaths {
            let folder = (socketPath as NSString).deletingLastPathComponent
            // Two paths in one folder get the same watch descriptor: their names are merged.
            let watch = inotify >= 0
                ? inotify_add_watch(inotify, folder, UInt32(IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF))
                : -1
            guard watch >= 0 else {
                socketsBlind = true
                continue
            }
            names[watch, default: [DaemonHoldRequest.socketName]].insert((socketPath as NSString).lastPathComponent)
        }
        self.names = names
        self.socketsBlind = socketsBlind
        if let lockPath, inotify >= 0 {
            lockWatch = inotify_add_watch(inotify, lockPath, UInt32(IN_CLOSE_WRITE | IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF))
        } else {
            lockWatch = -1
        }
        probe = lockPath.map { open($0, O_RDONLY | O_CLOEXEC) } ?? -1
        wakeup = WakePipe.make()
    }

    deinit {
        for fd in [inotify, probe, wakeup.read, wakeup.write] where fd >= 0 { close(fd) }
    }

    /// Whether another open file holds the store's lock now. Tried on this watch's own
    /// descriptor and let go at once; false when there is no lock file (nobody holds it).
    package var lockIsHeld: Bool {
        guard probe >= 0 else { return false }
        if flock(probe, LOCK_EX | LOCK_NB) == 0 {
            flock(probe, LOCK_UN)
            return false
        }
        return errno == EWOULDBLOCK
    }

    /// Ends a ``wait(until:recheckWithin:)`` in progress (or the next one) at once: the store
    /// was closed.
    package func wake() {
        guard wakeup.write >= 0 else { return }
        var one: UInt8 = 1
        _ = write(wakeup.write, &one, 1)
    }

    /// Returns once something that matters changed (see the type), ``wake()`` was called,
    /// `deadline` passed, or `recheckWithin` did (for a failure no event announces).
    package func wait(until deadline: DispatchTime?, recheckWithin: DispatchTimeInterval? = nil) {
        let held = lockIsHeld
        // Let go since the caller's try (by a holder whose close this watch cannot see, say):
        // the next try takes it. Not after a try that failed for another reason: that one is
        // paced by `recheckWithin`.
        if lockPath != nil, probe >= 0, !held, recheckWithin == nil { return }
        let (holder, pid) = held ? holderExit() : (-1, 0)
        defer { if holder >= 0 { close(holder) } }
        // Nothing would tell: no inotify (or the socket folder is missing), no lock file to
        // watch, or a held lock whose holder cannot be watched.
        let blind = socketsBlind || inotify < 0 || (lockPath != nil && probe < 0) || (held && (holder < 0 || lockWatch < 0))
        var until = deadline
        if blind { until = min(until ?? .distantFuture, .now() + .milliseconds(blindInterval)) }
        if let recheckWithin { until = min(until ?? .distantFuture, .now() + recheckWithin) }
        var descriptors = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wakeup.read, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: holder, events: Int16(POLLIN), revents: 0)]   // poll skips a negative fd
        sleeps.withLock { $0 += 1 }
        asleep?.signal()
        while true {
            var timeout: Int32 = -1
            if let until {
                let now = DispatchTime.now()
                guard now < until else { return }
                // Rounded up: a wait that ends a moment early would only be tried again.
                timeout = Int32(clamping: (until.uptimeNanoseconds - now.uptimeNanoseconds + 999_999) / 1_000_000)
            }
            // An error (EINTR, or one not expected) returns too: the caller tries again or its
            // deadline ends it; nothing here spins.
            let ready = poll(&descriptors, nfds_t(descriptors.count), timeout)
            guard ready != 0 else { continue }   // re-checks the deadline above
            guard ready > 0 else { return }
            if descriptors[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                _ = read(wakeup.read, &drain, drain.count)
                return
            }
            if descriptors[2].revents != 0 {
                // The holder exited: its lock is free.
                exited.withLock { $0 = pid }
                return
            }
            if descriptors[0].revents != 0, readEvents() { return }
        }
    }

    /// ``wait(until:recheckWithin:)`` for a task (no deadline: `nil`): on a thread of its own
    /// (it blocks in `poll(2)`; the cooperative pool must not), ended at once if the task is
    /// cancelled (``wake()``; the next wait may then return at once: one more try, no more).
    package func wait(until deadline: ContinuousClock.Instant?) async {
        var until: DispatchTime?
        if let deadline {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return }
            let (seconds, attoseconds) = remaining.components
            until = DispatchTime.now() + .nanoseconds(Int(min(seconds, 86_400 * 365) * 1_000_000_000 + attoseconds / 1_000_000_000))
        }
        let end = until
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread { [self] in
                    wait(until: end)
                    continuation.resume()
                }
            }
        } onCancel: {
            wake()
        }
    }

    /// Reads the queued inotify events; true if one names what this watch is for.
    private func readEvents() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var relevant = false
        while true {
            let n = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
            guard n > 0 else { return relevant }
            for event in InotifyEvent.parse(buffer, count: n) {
                if event.mask & UInt32(IN_Q_OVERFLOW) != 0 || event.watch == lockWatch { relevant = true }
                // The folder itself removed or moved: nothing more will come from it.
                guard let watched = names[event.watch] else { continue }
                if event.mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 { relevant = true }
                if watched.contains(event.name) { relevant = true }
            }
        }
    }

    /// A pidfd of the process whose pid the lock file holds (readable once it exited) and that
    /// pid, or -1: no pid written yet, the process gone already, the holder seen to exit
    /// before, no `pidfd_open` (a kernel before 5.3, a C library before 2.36), or this process.
    private func holderExit() -> (fd: Int32, pid: pid_t) {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = pread(probe, &buffer, buffer.count, 0)
        guard n > 0, let pid = pid_t(String(decoding: buffer[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
              pid > 0, pid != getpid(), pid != exited.withLock({ $0 }) else { return (-1, 0) }
        guard let handle = dlopen(nil, RTLD_NOW) else { return (-1, 0) }
        defer { dlclose(handle) }
        guard let symbol = dlsym(handle, "pidfd_open") else { return (-1, 0) }
        typealias PidfdOpen = @convention(c) (pid_t, UInt32) -> Int32
        return (unsafeBitCast(symbol, to: PidfdOpen.self)(pid, 0), pid)
    }
}
