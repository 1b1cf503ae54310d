import Foundation
import Logging
import Hearth
import HearthCore
import HearthIdentity

/// How commands reach a store: reads come straight from its file (so they work while
/// `hearth serve` holds the store open); writes and watching open the store and sync.
package struct StoreAccess: Sendable {
    package let folders: DeviceFolders
    package let peering: PeerSettings
    package let storeIdentifier: String
    package let identity: DeviceIdentity?
    /// The daemon's: idle links pinged rarely (``PeerSettings/syncSettings(_:sparseHeartbeats:)``).
    package var sparseHeartbeats = false
    /// The device the store opens on: the daemon's own. Nil for a command, whose store opens on
    /// the process's default device of the data folder (saved at exit, as an app's is).
    package var device: HearthDevice?
    /// How long a wait for this store's holder lasts at most where no event can tell that it
    /// changed (milliseconds; ``HolderWatch``): tests lengthen it, so that a missed event shows.
    package var holderBlindInterval = 1_000
    /// Signalled each time this process's wait for the store's holder goes to sleep
    /// (``HolderWatch``): tests act on the holder then, not after a pause.
    package var holderWaitAsleep: ChangeSignal?

    /// A given store of the given identity (the daemon's stores, one per file it finds).
    package init(folders: DeviceFolders, peering: PeerSettings, storeIdentifier: String, identity: DeviceIdentity?) {
        self.folders = folders
        self.peering = peering
        self.storeIdentifier = storeIdentifier
        self.identity = identity
    }

    /// The file of this store for the signed-in account (or the signed-out replica).
    package var location: StoreLocation {
        StoreLocation(dataDirectory: folders.storeDataDirectory, storeIdentifier: storeIdentifier,
                      account: identity?.account.id.hex)
    }

    package var exists: Bool { FileManager.default.fileExists(atPath: location.filePath) }

    /// Fails with "unknown store" unless this device has a file for the store.
    package func requireExisting(hint: String) throws {
        guard exists else {
            let whose = identity.map { "account \($0.account.displayName) (\($0.account.id.short))" } ?? "signed out"
            throw CommandError(.unknownStore,
                               "unknown store \(storeIdentifier): no file for it under \(folders.storeDataDirectory) (\(whose)); \(hint)")
        }
    }

    /// The store's values as its file holds them, without opening (locking) the store.
    package func readReplica() throws -> Replica {
        try requireExisting(hint: "it appears once written on this device (hearth set) or synced here (hearth serve)")
        do {
            guard let data = try AtomicFile.read(location.filePath) else { throw CommandError(.unknownStore, "unknown store \(storeIdentifier)") }
            return try ReplicaFile.decode(data, path: location.filePath).replica
        } catch let error as CommandError {
            throw error
        } catch {
            throw CommandError(.general, "cannot read \(location.filePath): \(error)")
        }
    }

    /// Opens the store, syncing if signed in; the library logs at `logLevel` unless told otherwise.
    /// With `.embedded` it owns the store or fails with storeLocked; with `.automatic` it attaches
    /// to the process that holds it (docs/local-attach.md).
    /// With `syncPaused`, sync is set up but starts only at `resumeSync()`.
    package func open(logLevel: Logger.Level = .error, attach: AttachMode = .embedded, syncPaused: Bool = false) throws -> UbiquitousKeyValueStore {
        var configuration = configuration(logLevel: logLevel)
        configuration.attach = attach
        configuration.syncStartsPaused = syncPaused
        do {
            if let device { return try device.store(storeIdentifier, configuration: configuration) }
            return try UbiquitousKeyValueStore(storeIdentifier: storeIdentifier, configuration: configuration)
        } catch where error.code == .storeLocked {
            throw CommandError(.storeLocked, "store \(storeIdentifier) is open in another process (\(error.reason)); "
                               + "quit that app first, or let it make the change")
        } catch {
            throw CommandError(.general, "cannot open store \(storeIdentifier): \(error)")
        }
    }

    /// What the store opens with: this command's folders and peers, the library logging at
    /// `logLevel` unless told otherwise.
    package func configuration(logLevel: Logger.Level) -> UbiquitousKeyValueStore.Configuration {
        var configuration = UbiquitousKeyValueStore.Configuration(
            dataDirectory: folders.storeDataDirectory, writeBehindDelay: .milliseconds(100),
            sync: peering.syncSettings(folders, sparseHeartbeats: sparseHeartbeats), logger: folders.logger(defaultLevel: logLevel))
        // For tests of a device whose clock is wrong (docs/command.md): libfaketime cannot stand
        // in, as it stops Swift's Task.sleep from ever waking.
        configuration.clockSkew = folders.clockSkew
        return configuration
    }

    /// One try at reaching the store: what ``reach(asking:timeout:)`` found.
    package enum Reach {
        /// Opened here (this process holds it now; close it when done).
        case opened(UbiquitousKeyValueStore)
        /// Another `hearth` process holds it and answered the request with this line.
        case answered(String)
        /// The request went to the holder, which closed the connection or did not answer
        /// in time: it may or may not have acted on it.
        case noReply
        /// Another process holds it and takes no request now: nothing was sent. `error`
        /// is the one to report if the caller gives up.
        case held(StoreHolder, CommandError)
    }

    /// Opens the store here, or, if another process holds it, sends `request` to that
    /// process's control socket (a `hearth serve` or `watch`: it reports delivery to peers) and
    /// waits up to `timeout` for the reply. If the holder has no control socket (an app), attaches
    /// to it: the write goes through the app, which hosts the store (docs/local-attach.md).
    /// A store opened here with `syncPaused` syncs only once the caller calls `resumeSync()`.
    /// `lockHeld`: a ``HolderWatch`` saw the lock held just now; the file is not tried then (a
    /// failed open closes the lock file, which would wake every process waiting for it), nor an
    /// attach while the store has no attach socket.
    package func reach(asking request: @autoclosure () -> String, timeout: Duration, syncPaused: Bool = false,
                       lockHeld: Bool = false) async throws -> Reach {
        // With a daemon running, the daemon holds the store (and syncs it after we exit): the
        // request goes to it, as to any holder.
        _ = try await DaemonControl.askToHold(location)
        do {
            guard !lockHeld else {
                throw CommandError(.storeLocked, "store \(storeIdentifier) is open in another process; quit that app first, or let it make the change")
            }
            return .opened(try open(syncPaused: syncPaused))
        } catch let error as CommandError where error.status == .storeLocked {
            switch try await ControlSocket.exchange(request(), with: ControlSocket.path(for: location, under: folders.controlSocketBase), timeout: timeout) {
            case .reply(let line): return .answered(line)
            case .noReply: return .noReply
            case .noListener:
                // Nothing to attach to while the lock is held (the caller's watch follows the
                // socket's appearance, with its own deadline).
                if lockHeld, !FileManager.default.fileExists(atPath: attachSocketPath) {
                    return .held(StoreHolder(lockPath: location.lockPath), error)
                }
                // Opening may wait for the host's snapshot (or its lock): not on the cooperative pool.
                let attached = await withCheckedContinuation { continuation in
                    Thread.detachNewThread { continuation.resume(returning: try? open(attach: .automatic)) }
                }
                if let attached { return .opened(attached) }
                return .held(StoreHolder(lockPath: location.lockPath), error)
            }
        }
    }

    /// "device NAME (ID) in account NAME (ID)", or "signed out".
    package var whoAmI: String {
        guard let identity else { return "signed out" }
        return "device \(identity.deviceName) (\(identity.deviceID.short)) in \(identity.account.displayName) (\(identity.account.id.short))"
    }
}

/// Maps a store write error to the command's statuses.
package func commandError(_ error: KeyValueStoreError, key: String) -> CommandError {
    switch error.code {
    case .storeLocked: CommandError(.storeLocked, error.description)
    case .persistenceFailed: CommandError(.general, error.description)
    case .initialSyncPending: CommandError(.general, error.description)
    default: CommandError(.invalidValue, error.description)
    }
}

/// The process that holds a store's lock, as the lock file names it (the library writes the
/// holder's pid there) and /proc describes it.
package struct StoreHolder: CustomStringConvertible {
    package let pid: Int32?
    /// Its command name (`/proc/PID/comm`); nil if it has exited, or cannot be seen.
    package let command: String?

    package init(lockPath: String) {
        let text = (try? String(contentsOfFile: lockPath, encoding: .utf8)) ?? ""
        pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
        command = pid.flatMap { try? String(contentsOfFile: "/proc/\($0)/comm", encoding: .utf8) }?
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Whether the holder may soon let go of the store or start answering requests, so that
    /// trying again is worth it: a `hearth` command (a one-shot `set`, `rm` or `peers` ends
    /// within its --wait; a `serve` or `watch` that is starting opens its control socket in
    /// a moment), or a holder already gone. An app holds a store for as long as it runs.
    package var mayLetGoSoon: Bool { command == nil || command == "hearth" }

    package var description: String {
        guard let pid else { return "another process" }
        return "process \(pid)" + (command.map { " (\($0))" } ?? "")
    }
}
