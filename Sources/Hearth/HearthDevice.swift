import Dispatch
import Foundation
import HearthCore
import HearthIdentity
import Logging
import NIOCore
import NIOPosix

/// One device of a household: its stores, their sync engines and the watch on its account
/// directory, with one owner and one lifecycle.
///
/// A device is made from the parts of a ``StoreConfiguration`` that define
/// one: the data directory (where its stores' files are), the sync settings (the account
/// directory, and how peers are found), the logger. Every store it opens uses them:
///
/// ```swift
/// let device = try HearthDevice(.init(dataDirectory: "/var/lib/notes"))
/// let store = try device.store("com.example.notes")
/// store.set("Groceries", forKey: "title")
/// await device.stop()      // saved, closed, sync stopped
/// ```
///
/// Several devices may run in one process (a test playing a household, say), each with its
/// own data and account directories: they share nothing but NIO's event loop group. Opening the
/// same data directory with two devices in one process is a mistake: the second device finds
/// the store files held by the first and attaches to it, as another process would
/// (docs/local-attach.md).
///
/// Apps rarely need one: ``UbiquitousKeyValueStore/default`` and
/// ``UbiquitousKeyValueStore/init(storeIdentifier:configuration:)`` open their store on the
/// process's default device for the configuration's data directory, made at first use and
/// never stopped (its stores are saved when the process exits, as Apple's are).
public final class HearthDevice: Sendable {
    /// What the device was made with; ``store(_:)`` opens every store with it.
    public let configuration: UbiquitousKeyValueStore.Configuration
    /// Its stores: one backend per store identifier.
    let stores = StoreTable()
    /// Its accounts' removals and known devices, one instance per file for all its engines.
    let records = HouseholdRecords()
    /// The one thread and inotify instance that follow its account directories (for the
    /// default devices, one the process's default devices share).
    let watcher: AccountDirectoryWatcher
    /// Whether ``watcher`` is this device's own, to stop with it.
    private let ownsWatcher: Bool
    /// Its sync engines, one per signed-in identity and sync settings.
    let engines: DeviceEngines
    /// Where its stores' files are: the real file system, or a test's simulated disk.
    package let disk: any StoreDisk
    /// When its stores' delayed saves run (nil: each store's I/O queue, after the delay).
    let saveScheduler: SaveScheduler?
    /// Where its stores' local sockets run (the host's socket for this user's other processes,
    /// the connection of a store attached to one): the group it was given, otherwise NIO's
    /// shared `MultiThreadedEventLoopGroup.singleton` (the default devices', a device made with
    /// ``init(_:)``).
    let eventLoopGroup: any EventLoopGroup
    private let stopped = Locked(false)

    /// A device of `configuration`'s data directory and sync settings. Nothing starts until a
    /// store is opened.
    ///
    /// - Throws: ``KeyValueStoreError`` with code ``KeyValueStoreError/Code/persistenceFailed``
    ///   when the configuration names no data directory.
    public convenience init(_ configuration: UbiquitousKeyValueStore.Configuration) throws(KeyValueStoreError) {
        try self.init(configuration, disk: SystemDisk())
    }

    /// A device whose stores keep their files on `disk` (HearthTesting's `SimulatedDisk`, say),
    /// in `configuration`'s data directory there. On a disk no other process sees
    /// (``StoreDisk/isSharedWithOtherProcesses``), its stores neither ask the daemon nor attach
    /// to another process nor offer themselves to others: a store held already is `storeLocked`.
    ///
    /// Its engines' TLS connections run on `eventLoopGroup` when one is given (its maker shuts
    /// it down, after ``stop()``), in place of the network the sync settings' environment names;
    /// otherwise on that network (TLS on NIO's shared `MultiThreadedEventLoopGroup.singleton`
    /// by default, a test's in-memory one). Its stores' local sockets (hosting a store for this
    /// user's other processes, attaching to one) run on `eventLoopGroup` too, or on the
    /// singleton without one: devices given a group each share nothing but what their maker
    /// shares.
    ///
    /// Its stores' delayed saves (the write-behind within `writeBehindDelay`, the retry 5 s after
    /// a failed save) run through `saveScheduler` when one is given, a simulator's virtual clock
    /// say; otherwise on each store's I/O queue after the delay.
    package convenience init(_ configuration: UbiquitousKeyValueStore.Configuration, disk: any StoreDisk,
                             eventLoopGroup: (any EventLoopGroup)? = nil, saveScheduler: SaveScheduler? = nil) throws(KeyValueStoreError) {
        guard !configuration.dataDirectory.isEmpty else {
            throw KeyValueStoreError(code: .persistenceFailed, key: nil, reason: "a device needs a data directory; the configuration names none")
        }
        self.init(checked: configuration, watcher: nil, disk: disk, eventLoopGroup: eventLoopGroup, saveScheduler: saveScheduler)
    }

    /// A device whose TLS sessions and store sockets (its apps' connections) all run on one
    /// event loop of NIO's shared group: what one write touches then stays on one thread. The
    /// device daemon's (docs/daemon.md).
    package static func onOneEventLoop(_ configuration: UbiquitousKeyValueStore.Configuration) throws(KeyValueStoreError) -> HearthDevice {
        try HearthDevice(configuration, disk: SystemDisk(), eventLoopGroup: MultiThreadedEventLoopGroup.singleton.next())
    }

    /// A device with `watcher` shared, or a watcher of its own when nil.
    private init(checked configuration: UbiquitousKeyValueStore.Configuration, watcher shared: AccountDirectoryWatcher?,
                 disk: any StoreDisk, eventLoopGroup: (any EventLoopGroup)? = nil, saveScheduler: SaveScheduler? = nil) {
        self.configuration = configuration
        self.disk = disk
        self.saveScheduler = saveScheduler
        self.eventLoopGroup = eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
        watcher = shared ?? AccountDirectoryWatcher(logger: configuration.logger)
        ownsWatcher = shared == nil
        engines = DeviceEngines(records: records, watcher: watcher, eventLoopGroup: eventLoopGroup)
    }

    /// Opens the store `storeIdentifier` on this device with the device's configuration, or
    /// returns another instance of it if it is open already (both see the same data).
    ///
    /// - Throws: ``KeyValueStoreError`` as ``UbiquitousKeyValueStore/init(storeIdentifier:configuration:)``
    ///   does, and with code ``KeyValueStoreError/Code/deviceStopped`` after ``stop()``.
    public func store(_ storeIdentifier: String) throws(KeyValueStoreError) -> UbiquitousKeyValueStore {
        try store(storeIdentifier, configuration: configuration)
    }

    /// Opens `storeIdentifier` with `configuration`, whose data directory is this device's: a
    /// default device's stores each bring their own (per-store parts, and the sync settings
    /// that choose their engine).
    package func store(_ storeIdentifier: String, configuration: UbiquitousKeyValueStore.Configuration) throws(KeyValueStoreError) -> UbiquitousKeyValueStore {
        let backend = try backend(storeIdentifier: storeIdentifier, configuration: configuration)
        return UbiquitousKeyValueStore(storeIdentifier: storeIdentifier, backend: backend)
    }

    func backend(storeIdentifier: String, configuration: UbiquitousKeyValueStore.Configuration) throws(KeyValueStoreError) -> StoreBackend {
        guard !isStopped else { throw .deviceStopped }
        return try stores.backend(storeIdentifier: storeIdentifier, configuration: configuration, device: self)
    }

    var isStopped: Bool { stopped.withLock { $0 } }

    /// Stops the device: a barrier. Once it returns, every store it opened is saved and closed
    /// (its file lock released; instances still held keep their values in memory only), every
    /// sync engine has stopped (its port closed, no session changes a replica), and the thread
    /// that watched the account directory has ended. Opening a store then throws
    /// ``KeyValueStoreError/Code/deviceStopped``. Calling it again does nothing more.
    public func stop() async {
        stopped.withLock { $0 = true }
        // Off the cooperative pool: an open in progress holds its slot's lock while it reads
        // the file (or waits for the process that holds it), and the table waits for it.
        let backends = await Self.offPool { [stores] in stores.openBackends }
        for backend in backends { await backend.close() }
        // Stores let go of whose deinit runs on another thread: their last writes go out first.
        let releases = stores.pendingReleases
        if !releases.isEmpty {
            await Self.offPool {
                let deadline = DispatchTime.now() + .seconds(2)
                for release in releases where !release.wait(until: deadline) {
                    self.configuration.logger.warning("stopping 2 s after a released store began to put out its last writes; they may be lost")
                }
            }
        }
        // Engines a store no longer holds (the daemon's, say) stop too.
        await engines.stopAll()
        if ownsWatcher { await watcher.stop() }
    }

    /// How many sync engines run (tests).
    var runningEngines: Int { engines.count }

    /// Runs `work`, which may block, on a Dispatch thread: never on the cooperative pool.
    private static func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .utility).async { continuation.resume(returning: work()) }
        }
    }

    // MARK: The default devices

    /// The process's default devices, by data directory: the one process-wide table Hearth
    /// keeps. Apple's `NSUbiquitousKeyValueStore.default` and `init(storeIdentifier:)` take no
    /// device, so the stores they open need one the process keeps for them; every store opened
    /// with a configuration of the same data directory shares its device (one backend per store,
    /// one engine per identity and sync settings), as they shared the process before there were
    /// devices. Keyed by data directory alone, because a store's file may be held by one
    /// backend in a process: two configurations that differ in their sync settings but name the
    /// same folder must still share the store (each brings its settings to its engine).
    ///
    /// The default devices share one account directory watcher (one thread, one inotify
    /// instance), as they are never stopped: a watcher each ran a process that opened stores in
    /// many data directories (the test suite) into the kernel's 128 inotify instances per user,
    /// and then nothing of that user could watch a file.
    private static let defaults = Locked<(devices: [String: HearthDevice], watcher: AccountDirectoryWatcher?)>(([:], nil))

    /// Saves every store of the default devices when the process exits normally, as Apple's
    /// system does when an app quits: write-behind must not lose what the app wrote in its last
    /// second. (A device made with ``init(_:)`` is saved by its ``stop()``.)
    private static let exitHook: Void = {
        atexit { HearthDevice.flushDefaultDevices() }
    }()

    /// The default device for `configuration`'s data directory, made at its first use.
    static func defaultDevice(for configuration: UbiquitousKeyValueStore.Configuration) -> HearthDevice {
        _ = exitHook
        return defaults.withLock { table in
            if let device = table.devices[configuration.dataDirectory] { return device }
            let watcher = table.watcher ?? AccountDirectoryWatcher(logger: configuration.logger)
            table.watcher = watcher
            let device = HearthDevice(checked: configuration, watcher: watcher, disk: SystemDisk())
            table.devices[configuration.dataDirectory] = device
            return device
        }
    }

    /// The exit hook: every default device's stores saved (or, attached, saved by their host).
    static func flushDefaultDevices() {
        for device in defaults.withLock({ Array($0.devices.values) }) { device.stores.flushAll() }
    }
}

/// Runs a store's delayed save (`save`) once `delay` has passed, on whatever clock the device's
/// maker keeps: a simulator's virtual one. The product's is Dispatch on the store's I/O queue.
package typealias SaveScheduler = @Sendable (_ delay: Duration, _ save: @escaping @Sendable () -> Void) -> Void

extension KeyValueStoreError {
    static var deviceStopped: Self {
        KeyValueStoreError(code: .deviceStopped, key: nil, reason: "the device has stopped; make a new one to open its stores again")
    }
}
