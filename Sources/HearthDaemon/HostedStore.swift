import Foundation
import Hearth
import HearthCore

/// A store this process holds open and syncs on behalf of the device (`serve`, `watch`, and
/// each store of `hearth daemon`): it answers other `hearth` commands over the store's control
/// socket (writes, and `status` for `hearth peers` and `hearth status`), optionally prints each
/// external change, and tracks when entries last moved.
///
/// While idle it writes nothing to disk: its state is in memory and given out on request.
package final class HostedStore: Sendable {
    package let store: UbiquitousKeyValueStore
    package let access: StoreAccess
    private let control: ControlServer?
    /// Saves, and prints if asked, each external change; nil in the daemon (see ``open``).
    private let printer: Task<Void, Never>?
    private let port: Locked<Int?>

    /// Opens the store, waiting while another process holds it (a one-shot `hearth set`, say:
    /// a serving process that gave up would leave the device with no process serving the
    /// store), creates its file if it has none, and starts serving it. Nil if `shouldStop`
    /// said so before the store was free: checked whenever `stopped` is signalled (and whenever
    /// the holder changes).
    ///
    /// `opened`: the store, opened already by the caller (the daemon, for a store a peer serves).
    ///
    /// `saveEachChange`: the file is saved right after each external change, so that `hearth get`
    /// (which reads the file) shows it at once (`serve`, `watch`). The daemon, whose stores apps
    /// write at any rate, relies on its 100 ms write-behind instead: a save per change cost it a
    /// fifth of its CPU under a busy app.
    package static func open(_ access: StoreAccess, label: String, output: DaemonOutput, printChanges: Bool = false, json: Bool = false,
                     saveEachChange: Bool = true, opened: UbiquitousKeyValueStore? = nil,
                     shouldStop: @escaping @Sendable () -> Bool, stopped: ChangeSignal? = nil) async throws -> HostedStore? {
        let store: UbiquitousKeyValueStore
        if let opened {
            store = opened
        } else {
            guard let waited = try await openWaiting(access, label: label, note: output.note, shouldStop: shouldStop, stopped: stopped) else { return nil }
            store = waited
        }
        // Help says serve creates the store; a fresh store with nothing in it would otherwise
        // have no file until its first change, and `hearth list` would call it unknown.
        if !access.exists, !(await store.internals.saveCreatingFile()) {
            output.note("\(label): could not create the file of store \(access.storeIdentifier) yet; it is written at the first change")
        }
        let hosted = HostedStore(store, access: access, output: output, printChanges: printChanges, json: json, saveEachChange: saveEachChange)
        do {
            let syncPort = store.isSyncing ? try await store.syncPort() : nil
            hosted.port.withLock { $0 = syncPort }
            return hosted
        } catch {
            await hosted.close()
            throw CommandError(.general, "cannot sync store \(access.storeIdentifier): \(error)")
        }
    }

    private init(_ store: UbiquitousKeyValueStore, access: StoreAccess, output: DaemonOutput, printChanges: Bool, json: Bool, saveEachChange: Bool) {
        self.store = store
        self.access = access
        // Nothing in this process observes the store but through `changes` (the printer below,
        // if any): no notification is posted for it, and the daemon's stores, with no printer,
        // skip the hop to the notification queue at every change.
        store.internals.stopPostingNotifications()
        let port = Locked<Int?>(nil)
        self.port = port
        let device = access.identity?.deviceID.hex
        let discovery = access.peering.discoveryDescription
        let liveStatus: @Sendable () -> LiveStatus = {
            let metrics = store.syncMetrics
            return LiveStatus(pid: getpid(), store: store.storeIdentifier, port: port.withLock { $0 }, device: device,
                              connectedPeers: store.internals.connectedPeerDeviceIDs, discoveredPeers: store.discoveredPeers,
                              discovery: discovery, lastExchange: metrics?.lastEntriesMoved,
                              entries: metrics.map { ($0.entriesSent, $0.entriesReceived) },
                              figures: StoreFigures(store.internals.replica, refusals: store.syncRefusals))
        }
        // Up before sync starts, so that hearth set/rm/peers find us as soon as we hold the store.
        let handler = ControlHandler(store: store, status: liveStatus, note: output.note)
        let control: ControlServer?
        do throws(CommandError) {
            control = try ControlServer(path: ControlSocket.path(for: access.location, under: access.folders.controlSocketBase), note: output.note)
        } catch {
            control = nil
            output.note("no control socket for store \(access.storeIdentifier) (\(error.message)); hearth set/rm on it will report it locked")
        }
        self.control = control
        control?.start { line in await handler.answer(line) }
        self.liveStatus = liveStatus

        guard printChanges || saveEachChange else {
            printer = nil
            return
        }
        let changes = store.changes
        printer = Task {
            for await change in changes {
                // What is printed is on disk too, so a `hearth get` run after reading it sees it
                // even once this process has gone.
                await store.internals.synchronizeOffPool()
                guard printChanges else { continue }
                let values = change.keys.map { ($0, store.value(forKey: $0)) }
                if json {
                    let fields = values.map { "\(PropertyListJSON.quote($0.0)):\($0.1.map(PropertyListJSON.string) ?? "null")" }
                    output.emit("{\"reason\":\"\(change.reason)\",\"code\":\(change.reason.rawValue),\"values\":{\(fields.joined(separator: ","))}}")
                } else {
                    for (key, value) in values {
                        output.emit("\(change.reason) (\(change.reason.rawValue)): \(key) " + (value.map { "= \(PropertyListJSON.human($0))" } ?? "removed"))
                    }
                }
            }
        }
    }

    /// What `hearth status` and `hearth peers` are told about this store.
    package let liveStatus: @Sendable () -> LiveStatus

    /// The sync port, once listening; nil when not syncing (``notSyncing`` says why).
    package var syncPort: Int? { port.withLock { $0 } }

    /// Why the store does not sync, as the daemon and `serve` say it: "not syncing (signed out)",
    /// or "not syncing: cannot start sync: …" when signed in and the start failed.
    package var notSyncing: String { (store.internals.notSyncingReason ?? .signedOut).description }

    /// Stops answering, saves and closes the store.
    package func close() async {
        control?.stop()
        printer?.cancel()
        await store.internals.close()
    }

    /// Opens the store, waiting while another process holds it for that process to let go
    /// or exit (``HolderWatch``: inotify on the lock file, a pidfd of its holder; an event, not
    /// a period), or for `shouldStop`, checked at once and whenever `stopped` is signalled.
    private static func openWaiting(_ access: StoreAccess, label: String, note: @Sendable (String) -> Void,
                                    shouldStop: @escaping @Sendable () -> Bool,
                                    stopped: ChangeSignal?) async throws -> UbiquitousKeyValueStore? {
        var noted = false
        var watch: HolderWatch?
        // A cancelled task stops too (its waits would end at once).
        while !shouldStop(), !Task.isCancelled {
            // Not while the lock is known to be held: a failed open closes the lock file, which
            // wakes every process waiting for it (this one included), again and again.
            if watch?.lockIsHeld != true {
                do {
                    // Owning the store, not attached: the holder hosts it (apps attach to it), and its
                    // listener, status and delivery figures are this process's (docs/command.md).
                    return try access.open(logLevel: .warning)
                } catch let error as CommandError where error.status == .storeLocked {
                    if !noted {
                        let holder = StoreHolder(lockPath: access.location.lockPath)
                        note("\(label): store \(access.storeIdentifier) is open in \(holder); waiting for it to be free (Ctrl-C to stop)")
                        noted = true
                    }
                }
            }
            guard let watch else {
                // Watched from now on, and tried once more before the first wait, so that a
                // release since the try above is not missed.
                watch = access.holderWatch()
                continue
            }
            await watch.wait(until: nil, orUntil: stopped, shouldStop)
        }
        return nil
    }
}
