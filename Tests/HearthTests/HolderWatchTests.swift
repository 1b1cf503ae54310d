import Foundation
@testable import Hearth
import HearthCore
import Testing

/// Waiting for a store another process holds is an event with a deadline (issue 27, point 5;
/// docs/local-attach.md, "Waiting for the holder"): real files, sockets folders and processes,
/// since inotify and pidfds are what is tested. Each wait that must end on an event has a
/// deadline far away, and the test checks it ended well before: a wait that missed its event
/// would run into it.
@Suite("Waiting for a store's holder")
struct HolderWatchTests {
    static let far: DispatchTimeInterval = .seconds(30)

    /// A socket folder (0700) and a store's lock file, removed by `cleanUp()`.
    struct Place {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-holder-\(UUID())").path
        var sockets: String { directory + "/run" }
        var socketPath: String { sockets + "/store-0123456789abcdef0123456789abcdef.sock" }
        var lockPath: String { directory + "/store.lock" }

        init() throws {
            try FileManager.default.createDirectory(atPath: sockets, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            #expect(FileManager.default.createFile(atPath: lockPath, contents: nil))
        }

        /// A file made under a name of its own, then renamed to `name` in the socket folder (as a
        /// host puts its socket in place once it listens).
        func put(_ name: String) throws {
            let temporary = sockets + "/" + name + ".next"
            #expect(FileManager.default.createFile(atPath: temporary, contents: nil))
            #expect(rename(temporary, sockets + "/" + name) == 0)
        }

        /// Where store `name` of this place's data folder lives (its folder made).
        func store(_ name: String) throws -> StoreLocation {
            let location = StoreLocation(dataDirectory: directory, storeIdentifier: name)
            try FileManager.default.createDirectory(atPath: location.directory, withIntermediateDirectories: true)
            return location
        }

        /// Opens store `name` (sync off) on a thread of its own: the open may wait for its holder.
        func open(_ name: String) async -> Result<UbiquitousKeyValueStore, KeyValueStoreError> {
            let configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: directory, sync: .disabled)
            return await HolderWatchTests.onThread {
                Result { () throws(KeyValueStoreError) in try UbiquitousKeyValueStore(storeIdentifier: name, configuration: configuration) }
            }
        }

        func cleanUp() { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// How long `body` took, run on a thread of its own: a wait blocks its thread, which must
    /// not be one of the few the other tests' tasks run on.
    static func timed(_ body: @escaping @Sendable () -> Void) async -> DispatchTimeInterval {
        await onThread {
            let start = DispatchTime.now()
            body()
            return .nanoseconds(Int(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds))
        }
    }

    /// Waits on `watch` (far) on a thread of its own, does `action` once that wait sleeps (what
    /// it sleeps on is armed by then), and returns how long the wait took.
    static func wait(on watch: HolderWatch, after action: () -> Void) async -> DispatchTimeInterval {
        let before = watch.sleepCount
        async let waited = timed { watch.wait(until: .now() + far) }
        while watch.sleepCount == before { await Task.yield() }
        action()
        return await waited
    }

    static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }

    static func less(_ a: DispatchTimeInterval, _ b: DispatchTimeInterval) -> Bool {
        DispatchTime.now() + a < DispatchTime.now() + b
    }

    @Test("The store's socket put in place ends the wait at once; another store's socket does not")
    func socketAppears() async throws {
        let place = try Place()
        defer { place.cleanUp() }
        let watch = HolderWatch(socketPath: place.socketPath, lockPath: nil, blindInterval: 60_000)
        try place.put("store-ffffffffffffffffffffffffffffffff.sock")
        let other = await Self.timed { watch.wait(until: .now() + .milliseconds(300)) }
        #expect(!Self.less(other, .milliseconds(300)), "another store's socket ended the wait")
        try place.put((place.socketPath as NSString).lastPathComponent)
        let ours = await Self.timed { watch.wait(until: .now() + Self.far) }
        #expect(Self.less(ours, Self.far), "the store's socket did not end the wait")
        // The daemon's socket counts too (an app attached with .required waits for the daemon).
        try place.put("daemon.sock")
        #expect(Self.less(await Self.timed { watch.wait(until: .now() + Self.far) }, Self.far))
    }

    @Test("A holder that lets go of the lock (LOCK_UN, then close) ends the wait; the lock reads free")
    func lockReleased() async throws {
        let place = try Place()
        defer { place.cleanUp() }
        var holder: FileLock? = try FileLock(path: place.lockPath)
        _ = holder
        let watch = HolderWatch(socketPath: place.socketPath, lockPath: place.lockPath, blindInterval: 60_000)
        #expect(watch.lockIsHeld)
        let waited = await Self.wait(on: watch) { holder = nil }
        #expect(Self.less(waited, Self.far), "letting go did not end the wait")
        #expect(!watch.lockIsHeld)
        // The probe let go at once: an open takes the lock.
        #expect((try? FileLock(path: place.lockPath)) != nil)
    }

    @Test("A holder killed with SIGKILL ends the wait through its pidfd, though no watched file event comes")
    func holderKilled() async throws {
        let place = try Place()
        defer { place.cleanUp() }
        // A shell that locks the file through a read-only descriptor (closing it makes no
        // IN_CLOSE_WRITE) and then sleeps as the same process: only its exit can tell.
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sh")
        child.arguments = ["-c", "exec 9<\"$0\"; flock -x 9; echo held; exec sleep 60", place.lockPath]
        let output = Pipe()
        child.standardOutput = output
        try child.run()
        defer { if child.isRunning { kill(child.processIdentifier, SIGKILL) } }
        let line = String(decoding: output.fileHandleForReading.readData(ofLength: 5), as: UTF8.self)
        try #require(line.hasPrefix("held"), "the child did not lock: \(line)")
        // What FileLock writes: the holder's pid.
        try Data("\(child.processIdentifier)\n".utf8).write(to: URL(fileURLWithPath: place.lockPath))
        let watch = HolderWatch(socketPath: place.socketPath, lockPath: place.lockPath, blindInterval: 60_000)
        #expect(watch.lockIsHeld)
        let pid = child.processIdentifier
        let waited = await Self.wait(on: watch) { kill(pid, SIGKILL) }
        #expect(Self.less(waited, Self.far), "the holder's exit did not end the wait")
        child.waitUntilExit()
        #expect(!watch.lockIsHeld)
    }

    @Test("A lock let go before the wait: the wait returns at once (the next try takes it)")
    func alreadyFree() async throws {
        let place = try Place()
        defer { place.cleanUp() }
        let watch = HolderWatch(socketPath: place.socketPath, lockPath: place.lockPath, blindInterval: 60_000)
        #expect(!watch.lockIsHeld)
        #expect(Self.less(await Self.timed { watch.wait(until: .now() + Self.far) }, Self.far))
    }

    @Test("Nothing happening: the wait ends at its deadline; wake() ends it at once")
    func deadlineAndWake() async throws {
        let place = try Place()
        defer { place.cleanUp() }
        let watch = HolderWatch(socketPath: place.socketPath, lockPath: nil, blindInterval: 60_000)
        let waited = await Self.timed { watch.wait(until: .now() + .milliseconds(200)) }
        #expect(!Self.less(waited, .milliseconds(200)))
        watch.wake()
        #expect(Self.less(await Self.timed { watch.wait(until: .now() + Self.far) }, Self.far))
    }

    @Test("An open of a store whose lock is held and whose holder never answers fails after 10 s with storeLocked, saying why, as before")
    func lockedUntilDeadline() async throws {
        let place = try Place()
        defer { place.cleanUp() }
        let location = try place.store("held")
        let holder = try FileLock(path: location.lockPath)
        defer { withExtendedLifetime(holder) {} }
        let start = DispatchTime.now()
        let outcome = await place.open("held")
        switch outcome {
        case .success:
            Issue.record("opened a store whose lock is held")
        case .failure(let error):
            #expect(error.code == .storeLocked)
            #expect(error.reason.contains("locked by process \(getpid())"), "\(error.reason)")
            #expect(error.reason.contains("attaching to it failed"), "\(error.reason)")
        }
        #expect(DispatchTime.now() >= start + StoreTable.attachTimeout)
    }

    /// A host that takes each connection at the store's socket and closes it unserved (as a
    /// host not ready yet did), on a thread of its own; `accepted` hears the count of each.
    final class DroppingHost: Sendable {
        let fd: Int32
        let done = DispatchSemaphore(value: 0)

        init(path: String, accepted: @escaping @Sendable (Int) -> Void) throws {
            var address = try #require(LocalSocketDirectory.address(path))
            fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            try #require(fd >= 0 && bound == 0 && listen(fd, 8) == 0, "cannot listen on \(path): errno \(errno)")
            Thread.detachNewThread { [fd, done] in
                var count = 0
                while true {
                    let connection = accept(fd, nil, nil)
                    guard connection >= 0 else { break }    // shut down by stop()
                    count += 1
                    accepted(count)
                    close(connection)
                }
                done.signal()
            }
        }

        func stop() {
            shutdown(fd, Int32(SHUT_RDWR))
            done.wait()
            close(fd)
        }
    }

    @Test("An attach a host takes and drops is tried again before the open's deadline, though no event follows (its socket, lock and holder stay); the open then takes the freed store")
    func droppedAttachIsRetried() async throws {
        let place = try Place()
        defer { place.cleanUp() }
        let location = try place.store("dropped")
        // The lock held here, in the name of a live process: the open's watch sleeps on that
        // process's pidfd, armed (not blind, which would re-check each second anyway).
        let holder = Locked<FileLock?>(try FileLock(path: location.lockPath))
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["60"]
        try sleeper.run()
        defer { kill(sleeper.processIdentifier, SIGKILL); sleeper.waitUntilExit() }
        try Data("\(sleeper.processIdentifier)\n".utf8).write(to: URL(fileURLWithPath: location.lockPath))
        let socketPath = LocalSocketDirectory.socketPath(dataDirectory: place.directory, storeIdentifier: "dropped")
        try LocalSocketDirectory.prepare((socketPath as NSString).deletingLastPathComponent)
        // The open tries twice before its first wait (once, then again once watched); a third
        // connection comes only from a retry no event asked for. It lets go of the lock then
        // (an event), so that the open ends at once, with the store.
        let host = try DroppingHost(path: socketPath) { count in
            if count == 3 { holder.withLock { $0 = nil } }
        }
        defer { host.stop(); unlink(socketPath) }
        switch await place.open("dropped") {
        case .success(let store):
            #expect(!store.internals.isAttached)
            await store.internals.close()
        case .failure(let error):
            Issue.record("the host that dropped the attach was not asked again before the deadline: \(error)")
        }
    }
}
