import Foundation
import Hearth
import HearthCore

/// A disk in memory that forgets what was not made durable when it crashes, and fails when told
/// to: for tests of what a store promises about its data, and for simulations of a household
/// whose machines lose power.
///
/// It keeps two views of every file, as a real disk with a page cache does: what a read returns
/// now, and what would come back after a power cut. A written file's bytes reach the second
/// only when the file is synced (`fsync`); a created, renamed or removed name only when its
/// directory is synced. ``crash()`` cuts the power: the files become what was durable (a file
/// whose name was durable but whose bytes never were comes back empty), every lock is released,
/// and every operation fails until ``restart()``, so the crashed device's objects can no longer
/// write. Directories are durable as soon as they are made.
///
/// Failures are injected two ways: ``failNext(_:with:)`` fails the next operation of a kind,
/// and ``faults`` gives each write and sync a chance of failing, drawn from the seed, so a run
/// fails at the same places every time.
///
/// ```swift
/// let disk = SimulatedDisk(seed: 27)
/// var device = try disk.device(.init(dataDirectory: "/sim/phone", sync: .disabled))
/// let store = try device.store("com.example.notes")
/// store.set("Groceries", forKey: "title")
/// store.synchronize()                      // durable: survives the crash
/// store.set("Errands", forKey: "title")    // in memory, maybe written, never synced
/// disk.crash()
/// disk.restart()
/// device = try disk.device(.init(dataDirectory: "/sim/phone", sync: .disabled))
/// try device.store("com.example.notes").string(forKey: "title")   // "Groceries"
/// ```
///
/// Every method may be called from any thread; the state is behind one lock.
public final class SimulatedDisk: StoreDisk, Sendable {
    /// A kind of operation that can be made to fail.
    public enum Operation: Sendable, CaseIterable {
        /// Reading a file.
        case read
        /// Writing a file's bytes (before they are durable).
        case write
        /// Syncing a file's bytes (`fsync`).
        case sync
        /// Renaming a file.
        case rename
        /// Syncing a directory's names.
        case syncDirectory

        /// The system call's name, for error messages.
        var name: String {
            switch self {
            case .read: "read"
            case .write: "write"
            case .sync: "fsync"
            case .rename: "rename"
            case .syncDirectory: "fsync directory"
            }
        }
    }

    /// How an injected failure fails.
    public enum Failure: Sendable, CaseIterable {
        /// `ENOSPC`: no space left on the device.
        case noSpace
        /// `EIO`: an input/output error.
        case inputOutput

        var errno: Int32 {
            switch self {
            case .noSpace: ENOSPC
            case .inputOutput: EIO
            }
        }
    }

    /// Chances of failure, each in `0...1`, drawn from the disk's seed; a failure is
    /// ``Failure/noSpace`` or ``Failure/inputOutput``, drawn too.
    public struct Faults: Sendable {
        /// The chance that a file write fails.
        public var write: Double
        /// The chance that a file or directory sync fails.
        public var sync: Double

        /// No failures.
        public static let none = Faults()

        /// Faults with these chances.
        public init(write: Double = 0, sync: Double = 0) {
            self.write = write
            self.sync = sync
        }
    }

    private struct File {
        /// What a read returns now.
        var data: Data
        /// What a crash leaves of the bytes (`nil`: never synced, so empty).
        var durable: Data?
    }

    private struct State {
        var files: [Int: File] = [:]
        var nextFile = 0
        /// Path → file, as the running system sees it.
        var names: [String: Int] = [:]
        /// Path → file, as a crash would leave it.
        var durableNames: [String: Int] = [:]
        var directories: Set<String> = ["/"]
        /// Held locks: path → the holder's token.
        var locks: [String: UInt64] = [:]
        var nextToken: UInt64 = 0
        var crashed = false
        var faults: Faults
        var failNext: [Operation: [Failure]] = [:]
        var random: UInt64
        var failures = 0
    }

    private let state: Locked<State>

    /// An empty disk; `seed` decides which operations ``faults`` fail.
    public init(seed: UInt64 = 0, faults: Faults = .none) {
        state = Locked(State(faults: faults, random: seed))
    }

    /// The chances of failure from now on.
    public var faults: Faults {
        get { state.withLock { $0.faults } }
        set { state.withLock { $0.faults = newValue } }
    }

    /// Fails the next `operation` with `failure` (each call adds one failure, taken in order).
    public func failNext(_ operation: Operation, with failure: Failure = .inputOutput) {
        state.withLock { $0.failNext[operation, default: []].append(failure) }
    }

    /// How many operations have failed by injection so far.
    public var injectedFailures: Int { state.withLock { $0.failures } }

    /// Cuts the power: what was not durable is lost, the locks are released, and every
    /// operation fails (`EIO`) until ``restart()``.
    public func crash() {
        state.withLock { s in
            var files: [Int: File] = [:]
            for id in Set(s.durableNames.values) {
                let durable = s.files[id]?.durable ?? Data()
                files[id] = File(data: durable, durable: durable)
            }
            s.files = files
            s.names = s.durableNames
            s.locks = [:]
            s.crashed = true
        }
    }

    /// Powers the disk on again after ``crash()``, with what was durable.
    public func restart() {
        state.withLock { $0.crashed = false }
    }

    /// What a read of `path` returns now, or `nil` if there is no such file.
    public func contents(of path: String) -> Data? {
        state.withLock { s in s.names[path].flatMap { s.files[$0]?.data } }
    }

    /// What a crash now would leave at `path`, or `nil` if it would leave no file.
    public func durableContents(of path: String) -> Data? {
        state.withLock { s in s.durableNames[path].map { s.files[$0]?.durable ?? Data() } }
    }

    /// Every file's path, sorted.
    public var paths: [String] { state.withLock { $0.names.keys.sorted() } }

    // MARK: StoreDisk

    package var isSharedWithOtherProcesses: Bool { false }

    package func read(_ path: String) throws(PersistenceError) -> Data? {
        try state.withLock { (s) throws(PersistenceError) -> Data? in
            try Self.check(&s, .read, path)
            return s.names[path].flatMap { s.files[$0]?.data }
        }
    }

    package func createDirectory(_ path: String, mode: mode_t) throws(PersistenceError) {
        try state.withLock { (s) throws(PersistenceError) in
            try Self.check(&s, nil, path)
            var directory = Self.normalized(path)
            while !s.directories.contains(directory) {
                guard s.names[directory] == nil else { throw Self.error("mkdir", path, EEXIST) }
                s.directories.insert(directory)
                directory = Self.parent(of: directory)
            }
        }
    }

    package func writeFile(_ data: Data, to path: String, mode: mode_t) throws(PersistenceError) {
        try state.withLock { (s) throws(PersistenceError) in
            try Self.check(&s, nil, path)
            guard s.directories.contains(Self.parent(of: path)) else { throw Self.error("open", path, ENOENT) }
            let id: Int
            if let existing = s.names[path] {
                id = existing
            } else {
                id = s.nextFile
                s.nextFile += 1
                s.files[id] = File(data: Data(), durable: nil)
                s.names[path] = id
            }
            // A write that fails has created (or truncated) the file and written nothing.
            s.files[id]!.data = Data()
            try Self.check(&s, .write, path)
            s.files[id]!.data = data
        }
    }

    package func syncFile(_ path: String) throws(PersistenceError) {
        try state.withLock { (s) throws(PersistenceError) in
            try Self.check(&s, .sync, path)
            guard let id = s.names[path] else { throw Self.error("open", path, ENOENT) }
            s.files[id]!.durable = s.files[id]!.data
        }
    }

    package func rename(_ source: String, to target: String) throws(PersistenceError) {
        try state.withLock { (s) throws(PersistenceError) in
            try Self.check(&s, .rename, target)
            guard let id = s.names.removeValue(forKey: source) else { throw Self.error("rename", source, ENOENT) }
            s.names[target] = id
        }
    }

    package func syncDirectory(of path: String) throws(PersistenceError) {
        try state.withLock { (s) throws(PersistenceError) in
            let directory = Self.parent(of: path)
            try Self.check(&s, .syncDirectory, directory)
            for name in s.durableNames.keys where Self.parent(of: name) == directory { s.durableNames[name] = nil }
            for (name, id) in s.names where Self.parent(of: name) == directory { s.durableNames[name] = id }
        }
    }

    @discardableResult
    package func remove(_ path: String) -> Bool {
        state.withLock { s in !s.crashed && s.names.removeValue(forKey: path) != nil }
    }

    package func fileExists(_ path: String) -> Bool {
        state.withLock { s in !s.crashed && (s.names[path] != nil || s.directories.contains(Self.normalized(path))) }
    }

    package func contentsOfDirectory(_ path: String) -> [String] {
        state.withLock { s in
            guard !s.crashed else { return [] }
            let directory = Self.normalized(path)
            let entries = Array(s.names.keys) + s.directories.filter { $0 != "/" }
            return entries.filter { Self.parent(of: $0) == directory }.map { ($0 as NSString).lastPathComponent }.sorted()
        }
    }

    package func lock(_ path: String) throws(PersistenceError) -> any StoreDiskLock {
        try state.withLock { (s) throws(PersistenceError) -> any StoreDiskLock in
            try Self.check(&s, nil, path)
            guard s.locks[path] == nil else { throw PersistenceError(.locked, path: path, reason: "locked by another holder on the simulated disk") }
            s.nextToken += 1
            s.locks[path] = s.nextToken
            return Lock(disk: self, path: path, token: s.nextToken)
        }
    }

    /// A held lock; letting it go releases it, unless a crash did already (and another took it).
    private final class Lock: StoreDiskLock {
        let disk: SimulatedDisk
        let path: String
        let token: UInt64

        init(disk: SimulatedDisk, path: String, token: UInt64) {
            self.disk = disk
            self.path = path
            self.token = token
        }

        deinit {
            disk.state.withLock { s in
                if s.locks[path] == token { s.locks[path] = nil }
            }
        }
    }

    // MARK: Failures

    /// Throws when the disk is down, or when `operation` is to fail (the next failure queued
    /// for it, else a draw against ``faults``).
    private static func check(_ s: inout State, _ operation: Operation?, _ path: String) throws(PersistenceError) {
        if s.crashed { throw PersistenceError(.io, path: path, reason: "the simulated disk has crashed; restart() it first") }
        guard let operation else { return }
        var failure: Failure?
        if var queued = s.failNext[operation], !queued.isEmpty {
            failure = queued.removeFirst()
            s.failNext[operation] = queued
        } else {
            let chance = switch operation {
            case .write: s.faults.write
            case .sync, .syncDirectory: s.faults.sync
            case .read, .rename: 0.0
            }
            if chance > 0, unit(&s.random) < chance {
                failure = unit(&s.random) < 0.5 ? .noSpace : .inputOutput
            }
        }
        guard let failure else { return }
        s.failures += 1
        throw error(operation.name, path, failure.errno)
    }

    private static func error(_ operation: String, _ path: String, _ code: Int32) -> PersistenceError {
        PersistenceError(.io, path: path, reason: "\(operation): \(String(cString: strerror(code))) (simulated disk)")
    }

    /// SplitMix64's next number, as a fraction in `0..<1`.
    private static func unit(_ state: inout UInt64) -> Double {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) / Double(1 << 53)
    }

    // MARK: Paths

    private static func normalized(_ path: String) -> String {
        path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    private static func parent(of path: String) -> String {
        // A clean path (no "//", no trailing "/": every store's) is what precedes its last "/",
        // as NSString says, without NSString's bridging and slash fixing (a tenth of a directory
        // sync's cost, which takes every name on the disk).
        let utf8 = path.utf8, slash = UInt8(ascii: "/")
        if let last = utf8.lastIndex(of: slash), last > utf8.startIndex, utf8.last != slash, !path.contains("//") {
            return String(path[..<last])
        }
        let parent = (normalized(path) as NSString).deletingLastPathComponent
        return parent.isEmpty ? "/" : parent
    }

    // MARK: Devices

    /// A device whose stores keep their files on this disk, in `configuration`'s data directory
    /// here: a store's writes are lost at ``crash()`` unless they were made durable
    /// (`UbiquitousKeyValueStore.synchronize()`, or the write-behind save), and the disk's
    /// injected failures reach the store as they would from a real disk. The stores are this
    /// process's alone: no other process attaches to them. After a crash, ``restart()`` the
    /// disk and make a new device: the old one's objects can no longer write.
    ///
    /// - Parameters:
    ///   - configuration: the device's settings; its data directory is a folder of this disk.
    ///   - scheduleSave: when given, each delayed save of the device's stores (the write-behind
    ///     within `writeBehindDelay` of a change, the retry 5 s after a failed save) is handed to
    ///     it with its delay instead of running on a timer: the test runs it when its own clock
    ///     says, or never (then a crash loses what it would have saved).
    /// - Throws: `KeyValueStoreError` with code `persistenceFailed` when the configuration
    ///   names no data directory.
    public func device(_ configuration: UbiquitousKeyValueStore.Configuration,
                       scheduleSave: (@Sendable (_ delay: Duration, _ save: @escaping @Sendable () -> Void) -> Void)? = nil)
        throws(KeyValueStoreError) -> HearthDevice {
        try HearthDevice(configuration, disk: self, saveScheduler: scheduleSave)
    }
}
