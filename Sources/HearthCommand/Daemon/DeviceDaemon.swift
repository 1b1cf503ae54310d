import Foundation
import Hearth
import HearthCore
import HearthIdentity

/// Hearth's `syncdefaultsd`: one process per user that holds every store of the signed-in
/// account on this device and keeps it synced, whether or not an app runs. Apps and `hearth`
/// commands reach a store it holds the way they reach any holder (docs/daemon.md).
///
/// It finds the stores in the account's data folder, at start and every `rescanInterval`
/// (a directory listing; nothing is written), so a store first written by an app, or received
/// from a peer, is held from then on. A store another process holds (an app running with its
/// embedded engine) is waited for, and held once that process lets go.
final class DeviceDaemon: Sendable {
    let global: GlobalOptions
    let options: StoreOptions
    let rescanInterval: Duration
    /// The account CA, when started with `--unlock`: the daemon renews its peers' certificates.
    let authority: AccountAuthority?

    private struct State: Sendable {
        var hosted: [String: HostedStore] = [:]
        /// Stores being opened (perhaps waiting for another process to let go).
        var opening: [String: Task<Void, Never>] = [:]
        /// The device's engine, kept up with or without stores, and whose account it syncs.
        var sync: DeviceSync?
        var syncAccount: String?
        var stopping = false
    }

    private let state = Locked(State())
    /// Signalled when a store's opening ends (held, or failed): what ``hold(_:timeout:)`` waits on.
    private let openings = ChangeSignal()

    init(global: GlobalOptions, options: StoreOptions, rescanInterval: Duration, authority: AccountAuthority? = nil) {
        self.global = global
        self.options = options
        self.rescanInterval = rescanInterval
        self.authority = authority
    }

    /// Holds stores until `stop()`.
    func run() async {
        while !state.withLock({ $0.stopping }) {
            scan()
            try? await Task.sleep(for: rescanInterval)
        }
    }

    /// Opens every store of the current account (or the signed-out ones) not held yet.
    func scan() {
        let identity: DeviceIdentity?
        do {
            identity = try global.currentIdentity()
        } catch {
            note("daemon: \(error); holding the signed-out stores only")
            identity = nil
        }
        followAccount(identity)
        let folder = StoreLocation(dataDirectory: global.storeDataDirectory, storeIdentifier: "-", account: identity?.account.id.hex).directory
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
        var access = StoreAccess(global: global, options: options, storeIdentifier: identifier, identity: identity)
        access.sparseHeartbeats = true
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
            let sync = try DeviceSync.start(configuration: configuration) { [weak self] identifier in
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
            note("daemon: cannot sync this device: \(error)")
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
            note("daemon: cannot take up store \(identifier), which a peer serves: \(error)")
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
        if opened == nil { state.withLock { $0.sync }?.claim(identifier, byApp: byApp) }
        do {
            let hosted = try await HostedStore.open(access, label: "daemon", saveEachChange: false, opened: opened, shouldStop: { state.withLock { $0.stopping } })
            let kept = state.withLock { s -> Bool in
                s.opening[identifier] = nil
                guard let hosted, !s.stopping else { return false }
                s.hosted[identifier] = hosted
                return true
            }
            openings.signal()
            if kept, let hosted {
                note("daemon: holding store \(identifier)\(why)" + (hosted.syncPort.map { ", syncing on port \($0)" } ?? ", not syncing (signed out)"))
            } else if let hosted {
                await hosted.close()
            }
        } catch {
            // Tried again at the next scan.
            state.withLock { $0.opening[identifier] = nil }
            openings.signal()
            note("daemon: cannot hold store \(identifier): \(error)")
        }
    }

    /// Holds `identifier` now, at an app's request (so that the app attaches to the daemon
    /// instead of hosting a new store itself); true once held. Waits at most `timeout`: a store
    /// another process holds is held once that process lets go, not now.
    func hold(_ identifier: String, timeout: Duration = .seconds(5)) async -> Bool {
        let identity: DeviceIdentity? = try? global.currentIdentity()
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
        return await ChangeSignal.waitUntil(ContinuousClock.now + timeout, observing: { [openings] }) {
            state.withLock { $0.hosted[identifier] != nil }
        }
    }

    /// What each held store says about itself, by identifier.
    var stores: [HostedStore] { state.withLock { $0.hosted.values.sorted { $0.store.storeIdentifier < $1.store.storeIdentifier } } }

    /// Stops opening, saves and closes every held store.
    func stop() async {
        let (hosted, opening, sync) = state.withLock { s in
            s.stopping = true
            defer { s.hosted = [:]; s.opening = [:]; s.sync = nil }
            return (Array(s.hosted.values), Array(s.opening.values), s.sync)
        }
        // No more stores from peers, then every store closed (the engine stops with the last).
        await sync?.stop()
        for task in opening { await task.value }
        for store in hosted { await store.close() }
    }
}
