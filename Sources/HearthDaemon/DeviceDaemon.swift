import Foundation
import Hearth
import HearthCore
import HearthIdentity

/// What a ``DeviceDaemon`` works with: the device's folders, how it finds peers, and where
/// its lock and control socket live.
package struct DaemonOptions: Sendable {
    package var folders: DeviceFolders
    package var peering: PeerSettings
    /// The folder of the daemon's lock (`daemon.lock`) and control socket (`daemon.sock`):
    /// ``RuntimeDirectory/path(environment:)`` in production, where apps look for it.
    package var runtimeDirectory: String
    /// How often to look for stores that appeared in the data folder.
    package var rescanInterval: Duration
    /// Where the daemon says what it holds and what failed (`daemon: holding store S`).
    package var output: DaemonOutput
    /// The device whose stores and engine the daemon runs, of `folders`' data folder; its maker
    /// stops it after the daemon. Nil (the command's): the daemon makes one at start and stops
    /// it with itself; never the process's default device, which apps of the process use.
    package var device: HearthDevice?

    package init(folders: DeviceFolders, peering: PeerSettings = PeerSettings(),
                 runtimeDirectory: String = RuntimeDirectory.path(), rescanInterval: Duration = .seconds(30), output: DaemonOutput,
                 device: HearthDevice? = nil) {
        self.device = device
        self.output = output
        self.folders = folders
        self.peering = peering
        self.runtimeDirectory = runtimeDirectory
        self.rescanInterval = rescanInterval
    }
}

/// Hearth's `syncdefaultsd`: one per user, holding every store of the signed-in account on
/// this device and keeping it synced, whether or not an app runs. Apps and `hearth` commands
/// reach a store it holds the way they reach any holder (docs/daemon.md). `hearth daemon run`
/// is this type and a signal handler; a test runs it in its own process:
///
/// ```swift
/// let daemon = try DeviceDaemon.start(DaemonOptions(folders: folders, runtimeDirectory: runtime))
/// // … DaemonControl.askStatus(in: runtime), DaemonControl.askToHold(location, runtimeDirectory: runtime) …
/// await daemon.stop()     // socket gone, stores saved and closed, lock free
/// ```
///
/// It finds the stores in the account's data folder, at start and every `rescanInterval`
/// (a directory listing; nothing is written), so a store first written by an app, or received
/// from a peer, is held from then on. A store another process holds (an app running with its
/// embedded engine) is waited for, and held once that process lets go.
package final class DeviceDaemon: Sendable {
    package let options: DaemonOptions
    package var folders: DeviceFolders { options.folders }
    /// The account CA, when started unlocked (`--unlock`): the daemon renews its peers' certificates.
    package let authority: AccountAuthority?
    private let lock: DaemonLock
    /// The device it runs: every store it holds opens on it, and its engine is this device's.
    package let device: HearthDevice
    /// Whether ``device`` is the daemon's own, to stop with it (``DaemonOptions/device`` was nil).
    private let ownsDevice: Bool

    private struct State: Sendable {
        var hosted: [String: HostedStore] = [:]
        /// Stores being opened (perhaps waiting for another process to let go).
        var opening: [String: Task<Void, Never>] = [:]
        /// The device's engine, kept up with or without stores, and whose account it syncs.
        var sync: DeviceSync?
        var syncAccount: String?
        var stopping = false
    }

    /// What ``start(_:unlock:)`` set going and ``stop()`` ends.
    private struct Lifecycle: Sendable {
        var control: ControlServer?
        var scanner: Task<Void, Never>?
        /// The one stop every caller of ``stop()`` waits for.
        var stopped: Task<Void, Never>?
    }

    private let state = Locked(State())
    private let lifecycle = Locked(Lifecycle())
    /// Signalled when a store's opening ends (held, or failed) and at stop: what ``hold(_:timeout:)``
    /// waits on, and an opening waiting for another process to let go of its store.
    private let openings = ChangeSignal()

    private init(_ options: DaemonOptions, authority: AccountAuthority?, lock: DaemonLock, device: HearthDevice, ownsDevice: Bool) {
        self.options = options
        self.authority = authority
        self.lock = lock
        self.device = device
        self.ownsDevice = ownsDevice
    }

    /// Starts the daemon: prepares the runtime folder (``RuntimeDirectory/prepare(_:)``), takes
    /// the user's daemon lock (``CommandError/Status/daemonRunning`` if another daemon has it),
    /// then calls `unlock` for the account CA to keep in memory (nil: none; after the lock, so
    /// that nobody is asked for a passphrase for a daemon that cannot run), opens the control
    /// socket (without one the daemon runs on, saying so) and starts holding stores, on
    /// `options.device` or on a device of its own.
    package static func start(_ options: DaemonOptions,
                              unlock: () throws -> AccountAuthority? = { nil }) throws -> DeviceDaemon {
        let directory = options.runtimeDirectory
        try RuntimeDirectory.prepare(directory)
        let lock = try DaemonLock.acquire(in: directory)
        let authority: AccountAuthority?
        let device: HearthDevice
        do {
            authority = try unlock()
            let base = StoreAccess(folders: options.folders, peering: options.peering, storeIdentifier: "-", identity: nil)
            // One event loop for the daemon's TLS sessions and its apps' connections: a write an
            // app sends reaches the sessions that push it, and a peer's change the apps, on the
            // thread that read it (no wake-up of another thread per write). Signatures and
            // verifications of big batches still go to the global executor (SyncStore).
            device = try options.device ?? HearthDevice.onOneEventLoop(base.configuration(logLevel: .warning))
        } catch {
            lock.release()
            throw error
        }
        let daemon = DeviceDaemon(options, authority: authority, lock: lock, device: device, ownsDevice: options.device == nil)
        let control: ControlServer?
        do throws(CommandError) {
            control = try ControlServer(path: DaemonControl.path(in: directory), note: options.output.note)
        } catch {
            control = nil
            options.output.note("daemon: no control socket in \(directory) (\(error.message)); hearth daemon status will not reach it")
        }
        control?.start { line in await DaemonControl.answer(line, daemon: daemon) }
        daemon.lifecycle.withLock { $0.control = control }
        let scanner = Task { await daemon.scanUntilStopped() }
        daemon.lifecycle.withLock { $0.scanner = scanner }
        return daemon
    }

    /// The path of the control socket, nil if the daemon has none (or has stopped).
    package var controlSocketPath: String? { lifecycle.withLock { $0.control?.path } }

    /// Looks for stores now and every `rescanInterval` until ``stop()`` (which cancels the wait).
    private func scanUntilStopped() async {
        while !Task.isCancelled, !state.withLock({ $0.stopping }) {
            scan()
            try? await Task.sleep(for: options.rescanInterval)
        }
    }

    /// Opens every store of the current account (or the signed-out ones) not held yet.
    private func scan() {
        let identity: DeviceIdentity?
        do {
            identity = try folders.currentIdentity()
        } catch {
            options.output.note("daemon: \(error); holding the signed-out stores only")
            identity = nil
        }
        followAccount(identity)
        let folder = StoreLocation(dataDirectory: folders.storeDataDirectory, storeIdentifier: "-", account: identity?.account.id.hex).directory
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        let identifiers = names.compactMap(StoreLocation.storeIdentifier(fromFileName:)).filter { !$0.isEmpty }.sorted()
        for identifier in identifiers {
            let access = self.access(identifier, identity)
            state.withLock { s in
                guard !s.stopping, s.hosted[identifier] == nil, s.opening[identifier] == nil else { return }
                s.opening[identifier] = Task { await self.host(access) }
            }
        }
    }

    private func access(_ identifier: String, _ identity: DeviceIdentity?) -> StoreAccess {
        var access = StoreAccess(folders: folders, peering: options.peering, storeIdentifier: identifier, identity: identity)
        access.sparseHeartbeats = true
        access.device = device
        return access
    }

    /// Keeps the device's engine up for the signed-in account, whether or not a store is open
    /// yet, taking up the stores peers serve (``DeviceSync``); follows sign-in and switches.
    private func followAccount(_ identity: DeviceIdentity?) {
        let account = identity?.account.id.hex
        let previous = state.withLock { s -> DeviceSync?? in
            guard !s.stopping, s.syncAccount != account || (account != nil && s.sync == nil) else { return .none }
            defer { s.sync = nil; s.syncAccount = account }
            return .some(s.sync)
        }
        guard case .some(let old) = previous else { return }
        if let old { Task { await old.stop() } }
        guard let identity else { return }
        let configuration = access("-", identity).configuration(logLevel: .warning)
        do {
            let sync = try DeviceSync.start(device: device, configuration: configuration) { [weak self] identifier in
                self?.adopt(identifier, identity)
            }
            // Only the account it was unlocked for (an account switch leaves the new one locked).
            if let authority, authority.account.id == identity.account.id { sync?.authority = authority }
            let kept = state.withLock { s -> Bool in
                guard !s.stopping, s.syncAccount == account else { return false }
                s.sync = sync
                return true
            }
            if !kept, let sync { Task { await sync.stop() } }
        } catch {
            options.output.note("daemon: cannot sync this device: \(error)")
        }
    }

    /// A store a peer serves and this device has not opened, once it holds a value (until then
    /// ``DeviceSync`` keeps it in memory): opened now (without waiting for anyone to let go),
    /// and held from then on.
    private func adopt(_ identifier: String, _ identity: DeviceIdentity) -> UbiquitousKeyValueStore? {
        let access = self.access(identifier, identity)
        let store: UbiquitousKeyValueStore
        do {
            store = try access.open(logLevel: .warning)
        } catch {
            options.output.note("daemon: cannot take up store \(identifier), which a peer serves: \(error)")
            return nil
        }
        state.withLock { s in
            guard !s.stopping, s.hosted[identifier] == nil, s.opening[identifier] == nil else { return }
            s.opening[identifier] = Task { await self.host(access, opened: store, why: " (served by a peer)") }
        }
        return store
    }

    private func host(_ access: StoreAccess, opened: UbiquitousKeyValueStore? = nil, why: String = "", byApp: Bool = false) async {
        let identifier = access.storeIdentifier
        let state = self.state
        // Opened for an app, or found on disk: a copy taken up in memory for a peer gives way
        // to it (the engine serves one per store). Only an app's request forgives the peer a
        // store written for it (a scan finds those at every start).
        let sync = opened == nil ? state.withLock { $0.sync } : nil
        sync?.willOpen(identifier)
        sync?.claim(identifier, byApp: byApp)
        defer { sync?.didOpen(identifier) }
        do {
            let hosted = try await HostedStore.open(access, label: "daemon", output: options.output, saveEachChange: false, opened: opened,
                                                   shouldStop: { state.withLock { $0.stopping } }, stopped: openings)
            let kept = state.withLock { s -> Bool in
                s.opening[identifier] = nil
                guard let hosted, !s.stopping else { return false }
                s.hosted[identifier] = hosted
                return true
            }
            // The note before the signal: a hold waiting on it answers the app, which may then
            // read the daemon's notes (the in-process tests do) and must find this line there.
            if kept, let hosted {
                options.output.note("daemon: holding store \(identifier)\(why)" + (hosted.syncPort.map { ", syncing on port \($0)" } ?? ", \(hosted.notSyncing)"))
            }
            openings.signal()
            if !kept, let hosted { await hosted.close() }
        } catch {
            // Tried again at the next scan.
            state.withLock { $0.opening[identifier] = nil }
            options.output.note("daemon: cannot hold store \(identifier): \(error)")
            openings.signal()
        }
    }

    /// Holds `identifier` now, at an app's request (so that the app attaches to the daemon
    /// instead of hosting a new store itself); true once held. Waits at most `timeout`: a store
    /// another process holds is held once that process lets go, not now.
    package func hold(_ identifier: String, timeout: Duration = .seconds(5)) async -> Bool {
        let identity: DeviceIdentity? = try? folders.currentIdentity()
        let access = self.access(identifier, identity)
        // An app uses it: a store held for a peer no longer counts against that peer (held
        // already, it is not opened again below).
        state.withLock { $0.sync }?.claim(identifier, byApp: true)
        state.withLock { s in
            guard !s.stopping, s.hosted[identifier] == nil, s.opening[identifier] == nil else { return }
            s.opening[identifier] = Task { await self.host(access, why: " (asked by an app)", byApp: true) }
        }
        // Woken when an opening ends, not by polling; a store that failed to open now may be
        // opened by the next scan within the timeout, so a failure does not end the wait.
        // A stopping daemon holds nothing more: the wait ends at once.
        _ = await ChangeSignal.waitUntil(ContinuousClock.now + timeout, observing: { [openings] }) {
            state.withLock { $0.hosted[identifier] != nil || $0.stopping }
        }
        return state.withLock { $0.hosted[identifier] != nil }
    }

    /// What each held store says about itself, by identifier.
    var stores: [HostedStore] { state.withLock { $0.hosted.values.sorted { $0.store.storeIdentifier < $1.store.storeIdentifier } } }

    /// Stops the daemon, and returns once it has: the control socket closed and removed (no
    /// request is taken from then on), no more scans, the device's engine stopped, every held
    /// store saved and closed (its sockets removed, its file lock let go), its own device stopped
    /// (a given one is its maker's to stop), and the daemon lock released, so that another
    /// daemon can start at once. Every caller waits for the same stop.
    package func stop() async {
        let stopped = lifecycle.withLock { l -> Task<Void, Never> in
            if let stopped = l.stopped { return stopped }
            let (control, scanner) = (l.control, l.scanner)
            l.control = nil     // the server's handler holds the daemon: let the cycle go
            l.scanner = nil
            let stopped = Task {
                control?.stop()
                scanner?.cancel()
                await scanner?.value
                await self.closeStores()
                self.lock.release()
            }
            l.stopped = stopped
            return stopped
        }
        await stopped.value
    }

    /// Stops opening, saves and closes every held store.
    private func closeStores() async {
        let (hosted, opening, sync) = state.withLock { s in
            s.stopping = true
            defer { s.hosted = [:]; s.opening = [:]; s.sync = nil }
            return (Array(s.hosted.values), Array(s.opening.values), s.sync)
        }
        openings.signal()
        // No more stores from peers, then every store closed (the engine stops with the last).
        await sync?.stop()
        for task in opening { await task.value }
        for store in hosted { await store.close() }
        // Whatever else it opened (a store taken up for a peer) and its engines and watcher.
        if ownsDevice { await device.stop() }
    }
}
