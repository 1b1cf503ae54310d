import Foundation
import HearthCore
import HearthIdentity
import Logging

/// Signing in, signing out and switching accounts, as Apple describes them: writes made
/// while signed out are reconciled with the account's data by timestamp at sign-in; a switch
/// replaces the visible set wholesale with the new account's, whatever the timestamps. A
/// switch stops the store's sync, moves its replica to the other account's file, and starts
/// sync again as the new account's device: part of the sync lifecycle.
extension StoreSync {
    /// Follows the account directory's `current` pointer (changed by `hearth account …` or
    /// another app) and switches when it changes. Told by the device's ``AccountDirectoryWatcher``
    /// (inotify: nothing runs while the pointer stays put); each check compares the pointer with
    /// the account the store is on, and checks run one after another.
    func watchAccount(settings: SyncSettings) {
        guard let device = state.withLock({ $0.owner }) else {
            logger.error("cannot follow the account directory: the store belongs to no device", metadata: ["store": "\(storeIdentifier)"])
            return
        }
        let directory = settings.accountDirectory ?? AccountStore.defaultDirectory().path
        let accounts = AccountStore(directory: URL(fileURLWithPath: directory), logger: logger,
                                    records: device.records, watcher: device.watcher)
        let checks = AccountChecks()
        let token = device.watcher.subscribe(directory) { [weak self] in
            checks.enqueue { [weak self] failed in await self?.followAccount(accounts, settings: settings, failed: &failed) }
        }
        state.withLock { $0.accountWatch = (device.watcher, directory, token) }
        // A change made before the subscription is noticed too.
        checks.enqueue { [weak self] failed in await self?.followAccount(accounts, settings: settings, failed: &failed) }
    }

    /// Switches if the pointer names another account than the store's. `failed` is the
    /// pointer a switch to which failed (logged once; tried again when the pointer changes).
    private func followAccount(_ accounts: AccountStore, settings: SyncSettings, failed: inout AccountID??) async {
        let now = try? accounts.currentAccountID()
        guard let backend, now?.hex != backend.location?.account, failed != .some(now) else { return }
        do {
            let identity = now == nil ? nil : try accounts.loadCurrentIdentity()
            try await switchAccount(backend, to: identity, settings: settings)
            failed = nil
        } catch {
            failed = .some(now)
            logger.error("could not follow the account change: \(error)", metadata: ["store": "\(storeIdentifier)"])
        }
    }

    func stopWatchingAccount() {
        guard let (watcher, directory, token) = state.withLock({ s in defer { s.accountWatch = nil }; return s.accountWatch }) else { return }
        watcher.unsubscribe(directory, token: token)
    }

    /// Switches `backend`'s store to `identity`'s account (`nil`: signed out).
    ///
    /// - From signed out to an account: the signed-out writes are merged into the account's
    ///   replica by last-writer-wins (or dropped with `discardWritesBeforeInitialSync`), and
    ///   the signed-out replica is emptied; keys whose value changed are posted as
    ///   accountChange; the first download from peers then posts initialSyncChange.
    /// - Between accounts, or signing out: the visible set becomes the other replica's (its
    ///   cached file, then what its peers send), posted as accountChange with every key whose
    ///   value differs.
    func switchAccount(_ backend: StoreBackend, to identity: DeviceIdentity?, settings: SyncSettings) async throws {
        let target = identity?.account.id.hex
        guard backend.isPersistent, let current = backend.location, current.account != target else { return }
        let started = ContinuousClock.now
        await stop(reason: .signedOut)
        let stopped = ContinuousClock.now
        await backend.flushOffPool()
        let location = StoreLocation(dataDirectory: backend.dataDirectory, storeIdentifier: storeIdentifier, account: target)
        let logger = self.logger
        let device = identity?.deviceID.data
        // The other account's file is on the disk of this one, its run IDs from the same source.
        guard let file = backend.state.withLock({ $0.storage }) else { return }
        let (storage, opened) = try await backend.saves.onIOQueue {
            try ReplicaStorage.open(location, on: file.disk, device: device, logger: logger, wall: backend.wall, random: file.random)
        }
        let loaded = ContinuousClock.now
        let signingIn = current.account == nil
        let (event, previousStorage) = backend.state.withLock { s -> (ChangeEvent?, ReplicaStorage?) in
            let event = AccountSwitch.replace(&s.replica, with: opened, signingIn: signingIn,
                                              discardSignedOutWrites: settings.discardWritesBeforeInitialSync,
                                              device: device, wall: backend.wallMilliseconds, logger: logger)
            let previous = s.storage
            s.device = device
            s.attachedApplied = [:]
            s.storage = storage
            s.savedVector = opened.vector
            s.generation &+= 1        // the new file holds the merge only once saved
            return (event, previous)
        }
        // The signed-out writes now live in the account; the signed-out replica starts over.
        if signingIn, let previousStorage { try await backend.saves.onIOQueue { try previousStorage.save(Replica()) } }
        await backend.flushOffPool()
        logger.info("account changed", metadata: ["store": "\(storeIdentifier)", "account": "\(target?.prefix(8) ?? "signed out")",
                                                  "changedKeys": "\(event?.keys.count ?? 0)",
                                                  "took": "\(ContinuousClock.now - started) (sync stopped in \(stopped - started), file opened in \(loaded - stopped))"])
        if let event { backend.post(event) }
        // Attached processes reattach: a snapshot of the new account's data, posted as accountChange.
        backend.state.withLock { $0.localHost }?.closeClients()
        if let identity { start(backend, identity: identity, settings: settings) }
    }
}

/// A store's account checks, run one after another (a burst of changes to the pointer must not
/// start concurrent switches), each after the previous one ended.
final class AccountChecks: Sendable {
    private struct State {
        var last: Task<Void, Never>?
        var failed: AccountID?? = nil
    }
    private let state = Locked(State())

    func enqueue(_ check: @escaping @Sendable (inout AccountID??) async -> Void) {
        state.withLock { s in
            let previous = s.last
            s.last = Task { [self] in
                await previous?.value
                var failed = state.withLock { $0.failed }
                await check(&failed)
                state.withLock { $0.failed = failed }
            }
        }
    }
}
