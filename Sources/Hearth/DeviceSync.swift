import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import Logging

/// A device daemon's hold on this device's sync: the engine of the signed-in account (its
/// listener, its mDNS service, one connection per peer device) kept up whether or not a store
/// is open, and taking up every store a peer device serves that this device has not opened.
///
/// The stores the daemon opens with the same configuration share this engine. A store a peer
/// offers is taken up in memory the first time the peer mentions it, and opened with `open`
/// (return `nil` to leave it alone) once it holds a value, synced from then on: an always-on
/// device keeps the household's data for the devices that come and go. What one peer makes it
/// take up is bounded (``maximumAdoptionsPerPeer``; docs/daemon.md).
///
/// ```swift
/// let configuration = UbiquitousKeyValueStore.Configuration(sync: SyncSettings())
/// let sync = try DeviceSync.start(configuration: configuration) { identifier in
///     try? UbiquitousKeyValueStore(storeIdentifier: identifier, configuration: configuration)
/// }
/// // … later
/// await sync?.stop()
/// ```
package final class DeviceSync: Sendable {
    /// How many stores one peer device may make this device take up before anything here uses
    /// them (a local app opening one confirms it, and then it no longer counts). Past it, what
    /// the peer names is ignored (one log line per peer a minute). 16: a household's apps use a
    /// store or two each, and a store a local app has opened no longer counts; while the stores
    /// a peer introduces hold no value they cost no descriptor, and persisted ones cost about
    /// three (the file's lock, the local socket), so a member can make this device hold at
    /// most about 50 descriptors for it, far from systemd's soft limit of 1,024.
    package static let maximumAdoptionsPerPeer = 16

    private struct Adoptions {
        /// Stores a peer named that hold no value yet: in memory only (no file, no descriptor),
        /// with the task that waits for their first value.
        var pending: [String: (peer: DeviceID, backend: StoreBackend, watch: Task<Void, Never>)] = [:]
        /// Per peer, the stores it made this device take up in this run (pending or persisted
        /// since) that no local app has opened.
        var byPeer: [DeviceID: Set<String>] = [:]
        /// Stores being opened with their file, between their memory copy's detach and the
        /// file's attach: not taken up in memory again meanwhile (another peer naming one then
        /// made the file's store find the engine taken).
        var promoting: Set<String> = []
        /// Stores the daemon is opening with their file (``willOpen(_:)`` … ``didOpen(_:)``), by
        /// how many openings: not taken up in memory meanwhile, for the same reason.
        var opening: [String: Int] = [:]
        /// Stores written to disk for the peer that named them and not opened by a local app
        /// since: kept in ``introductionsPath`` so that the bound holds across restarts.
        var written: [String: DeviceID] = [:]
        var stopped = false
    }

    private let lease: DeviceEngines.Lease
    /// The stores opened for peers: kept open for as long as this runs.
    private let adopted = Locked<[String: UbiquitousKeyValueStore]>([:])
    private let adoptions = Locked(Adoptions())
    /// `<data>/<account>/adopted-stores`: which peer each store written for a peer came from
    /// (a binary plist, store → device ID; no `.plist` suffix, so never taken for a store).
    private let introductionsPath: String
    /// Saves that file off the callers' threads (some are on the cooperative pool).
    private let saver = DispatchQueue(label: "hearth.device-sync.adoptions")
    /// Promotions in flight (``promote(_:open:)``'s work off the pool): their introductions are
    /// saved at their end, which ``settle()`` waits for.
    private let promotions = DispatchGroup()
    private let logger: Logger
    /// Run between a copy's registration and its attach (tests: to claim it in that window).
    package let beforeMemoryAttach = Locked<(@Sendable (String) -> Void)?>(nil)
    /// Refusals past the bound: one line per peer a minute.
    private let refusals = LimitedLog()
    /// Where a store's file is, by identifier (this account, this data directory).
    private let locate: @Sendable (String) -> StoreLocation

    /// The account's device ID this engine syncs as.
    package let deviceID: String

    /// Starts (or joins) the engine for `configuration`'s signed-in account; `nil` when sync is
    /// off or nobody is signed in.
    ///
    /// A store a peer names is first taken up in memory only: no file, no descriptor, nothing
    /// that outlives the process. It is opened with `open` (its file made, synced from then
    /// on) once it holds a value. Each peer may make this device take up at most
    /// ``maximumAdoptionsPerPeer`` stores that no local app opened (see ``claim(_:)``).
    ///
    /// The engine is the one of the process's default device for `configuration`'s data
    /// directory: the stores `open` opens with `UbiquitousKeyValueStore(storeIdentifier:configuration:)`
    /// sync on it too.
    package static func start(configuration: UbiquitousKeyValueStore.Configuration,
                             open: @escaping @Sendable (String) -> UbiquitousKeyValueStore?) throws(KeyValueStoreError) -> DeviceSync? {
        try start(device: .defaultDevice(for: configuration), configuration: configuration, open: open)
    }

    /// As ``start(configuration:open:)``, on `device`'s engine (`open` should open its stores on
    /// `device` too, with `device.store(_:)`); `configuration` defaults to the device's.
    package static func start(device: HearthDevice, configuration: UbiquitousKeyValueStore.Configuration? = nil,
                             open: @escaping @Sendable (String) -> UbiquitousKeyValueStore?) throws(KeyValueStoreError) -> DeviceSync? {
        let configuration = configuration ?? device.configuration
        guard let identity = StoreTable.signedInIdentity(configuration) else { return nil }
        let lease: DeviceEngines.Lease
        do {
            lease = try device.engines.acquire(identity: identity, settings: configuration.sync, logger: configuration.logger)
        } catch let error as KeyValueStoreError {
            throw error
        } catch {
            throw KeyValueStoreError(code: .syncUnavailable, key: nil, reason: "cannot start this device's sync: \(error)")
        }
        let locate: @Sendable (String) -> StoreLocation = { identifier in
            StoreLocation(dataDirectory: configuration.dataDirectory, storeIdentifier: identifier, account: identity.account.id.hex)
        }
        let sync = DeviceSync(lease: lease, deviceID: identity.deviceID.hex,
                              introductionsPath: (locate("-").directory as NSString).appendingPathComponent("adopted-stores"),
                              logger: configuration.logger, locate: locate)
        sync.loadIntroductions(existing: { FileManager.default.fileExists(atPath: locate($0).filePath) })
        lease.engine.onStoreServed = { [weak sync] identifier, peer in sync?.served(identifier, by: peer) }
        lease.engine.storeProvider = { [weak sync] identifier, peer in
            guard let sync else { return nil }
            // A file of it exists (written here before): it is this device's store already.
            if FileManager.default.fileExists(atPath: locate(identifier).filePath) { return sync.persist(identifier, open: open) }
            return sync.adoptInMemory(identifier, for: peer, configuration: configuration, device: identity.deviceID.data, open: open)
        }
        return sync
    }

    /// Opening attaches the store to this engine (same identity and settings): hand back its
    /// replica, which the engine finds attached already.
    private func persist(_ identifier: String, open: @Sendable (String) -> UbiquitousKeyValueStore?) -> StoreBackend? {
        guard let store = open(identifier) else { return nil }
        adopted.withLock { $0[identifier] = store }
        return store.backend
    }

    /// A memory-only replica of `identifier` for the engine, or `nil` once `peer` has used up
    /// its ``maximumAdoptionsPerPeer``.
    private func adoptInMemory(_ identifier: String, for peer: DeviceID, configuration: UbiquitousKeyValueStore.Configuration,
                               device: Data, open: @escaping @Sendable (String) -> UbiquitousKeyValueStore?) -> StoreBackend? {
        let logger = configuration.logger
        enum Outcome { case adopted(StoreBackend), pending(StoreBackend), refused(count: Int?) }
        let outcome = adoptions.withLock { a -> Outcome in
            guard !a.stopped, !a.promoting.contains(identifier), a.opening[identifier] == nil else { return .refused(count: nil) }
            if let pending = a.pending[identifier] { return .pending(pending.backend) }
            let count = a.byPeer[peer]?.count ?? 0
            guard count < Self.maximumAdoptionsPerPeer else { return .refused(count: count) }
            let backend = StoreBackend(storeIdentifier: identifier, storage: nil, replica: Replica(), logger: logger,
                                       writeBehindDelay: configuration.writeBehindDelay, wall: configuration.wallClock,
                                       dataDirectory: configuration.dataDirectory)
            backend.state.withLock { $0.device = device }
            // Promoted at its first value: a store a peer merely names never reaches the disk.
            let stream = backend.makeStream()
            let watch = Task { [weak self] in
                for await _ in stream {
                    self?.promote(identifier, open: open)
                    return
                }
            }
            a.pending[identifier] = (peer, backend, watch)
            a.byPeer[peer, default: []].insert(identifier)
            return .adopted(backend)
        }
        switch outcome {
        case .adopted(let backend):
            beforeMemoryAttach.withLock { $0 }?(identifier)
            // Synced with that peer alone: announced to the others, it would be charged to this device there.
            do {
                // Only while still pending: the daemon may have claimed it since (claim's detach
                // then found nothing to detach), and this late attach would take the engine's
                // place from the file's store it opens next ("attached already").
                try lease.engine.attach(backend, onlyFor: peer, while: { [weak self] in
                    self?.adoptions.withLock { $0.pending[identifier]?.backend === backend } ?? false
                })
            } catch where error.code == .withdrawn {
                logger.debug("not taking up store \(String(reflecting: identifier)) in memory: an app here claimed it meanwhile")
                return nil
            } catch {
                // Another copy is attached (it is this device's now): only forget ours.
                adoptions.withLock { a in
                    a.pending.removeValue(forKey: identifier)?.watch.cancel()
                    a.byPeer[peer]?.remove(identifier)
                }
                logger.warning("cannot take up store \(String(reflecting: identifier)), which peer \(peer) serves: \(error)")
                return nil
            }
            logger.debug("taking up store \(String(reflecting: identifier)) in memory, which peer \(peer) serves; written to disk at its first value")
            return backend
        case .pending(let existing):
            return existing
        case .refused(let count):
            if let count {
                refusals.log(.warning, "peer \(peer) has made this device take up \(count) stores no app here uses; ignoring store \(String(reflecting: identifier)) and the others it names (logged once a minute)",
                             kind: "adoption bound", peer: "\(peer)", to: logger)
            }
            return nil
        }
    }

    /// A store taken up in memory got its first value: it becomes a store of this device, with
    /// its file (opened by `open`; the peers send its values again to the file's replica).
    /// Still counted against the peer that named it until a local app opens it.
    private func promote(_ identifier: String, open: @escaping @Sendable (String) -> UbiquitousKeyValueStore?) {
        let pending = adoptions.withLock { a -> (peer: DeviceID, backend: StoreBackend, watch: Task<Void, Never>)? in
            guard !a.stopped, let pending = a.pending.removeValue(forKey: identifier) else { return nil }
            a.promoting.insert(identifier)
            return pending
        }
        guard let pending else { return }
        lease.engine.detach(storeIdentifier: identifier)
        // Opening reads and writes files: never on the cooperative pool.
        promotions.enter()
        DispatchQueue.global(qos: .utility).async { [self] in
            defer { promotions.leave() }
            // What the memory copy holds goes into the file first: the peer that sent it may be
            // gone by the time the file's store asks (a hub keeps stores for devices that leave).
            let location = locate(identifier)
            if !FileManager.default.fileExists(atPath: location.filePath) {
                do {
                    // The daemon's stores are on the real disk: other processes attach to them. Only
                    // saved here, so no replica ID is drawn from `random`.
                    try ReplicaStorage(location: location, disk: SystemDisk(), logger: logger, wall: pending.backend.wall,
                                       random: { UInt64.random(in: .min ... .max) }).save(pending.backend.replica)
                } catch {
                    logger.warning("cannot write store \(String(reflecting: identifier)) taken up for peer \(pending.peer): \(error); its peers send it again")
                }
            }
            let written = persist(identifier, open: open) != nil
            let table = adoptions.withLock { a -> [String: DeviceID]? in
                a.promoting.remove(identifier)
                // Still counted (claim() may have run meanwhile: then it is the app's).
                guard written, a.byPeer[pending.peer]?.contains(identifier) == true else { return nil }
                a.written[identifier] = pending.peer
                return a.written
            }
            if let table { saveIntroductions(table) }
            pending.backend.logger.info("store \(String(reflecting: identifier)), which peer \(pending.peer) serves, got its first value: kept on this device from now on")
        }
    }

    /// The daemon is about to open `identifier` with its file: a store taken up in memory for a
    /// peer is let go of (the file's store takes its place on the engine) and no longer counts
    /// (its file was made here, not by the peer). `byApp`: a local app asked for it, so a store
    /// written for a peer no longer counts either; the daemon's scan of its folder passes false,
    /// or every store written for a peer would be forgiven at each start.
    /// The daemon opens `identifier` with its file from now until ``didOpen(_:)``: a peer naming
    /// it meanwhile does not make it be taken up in memory again, which left the file's store
    /// unable to attach ("attached already") and the store held but not syncing. Call it
    /// before ``claim(_:byApp:)``, so that no copy is taken up between the claim and the open.
    package func willOpen(_ identifier: String) {
        adoptions.withLock { $0.opening[identifier, default: 0] += 1 }
    }

    /// The open that ``willOpen(_:)`` announced has ended (the store attached, or it failed).
    package func didOpen(_ identifier: String) {
        adoptions.withLock { a in
            guard let count = a.opening[identifier] else { return }
            a.opening[identifier] = count > 1 ? count - 1 : nil
        }
    }

    package func claim(_ identifier: String, byApp: Bool = true) {
        let (pending, table) = adoptions.withLock { a -> ((peer: DeviceID, backend: StoreBackend, watch: Task<Void, Never>)?, [String: DeviceID]?) in
            let pending = a.pending.removeValue(forKey: identifier)
            if let pending { a.byPeer[pending.peer]?.remove(identifier) }
            guard byApp, let peer = a.written.removeValue(forKey: identifier) else { return (pending, nil) }
            a.byPeer[peer]?.remove(identifier)
            return (pending, a.written)
        }
        if let table { saveIntroductions(table) }
        guard let pending else { return }
        pending.watch.cancel()
        lease.engine.detach(storeIdentifier: identifier)
    }

    /// A second member serves a store taken up for another: it is the household's, not that
    /// peer's word alone, so it no longer counts against that peer (it stays where it is: in
    /// memory until it holds a value, or on disk).
    func served(_ identifier: String, by peer: DeviceID) {
        let table = adoptions.withLock { a -> [String: DeviceID]? in
            let introducer = a.pending[identifier]?.peer ?? a.written[identifier]
            guard let introducer, introducer != peer, a.byPeer[introducer]?.remove(identifier) != nil else { return nil }
            return a.written.removeValue(forKey: identifier) != nil ? a.written : nil
        }
        if let table { saveIntroductions(table) }
    }

    /// Reads ``introductionsPath``: each store still on disk counts against its peer again.
    private func loadIntroductions(existing: (String) -> Bool) {
        guard let data = try? AtomicFile.read(introductionsPath), let table = try? BinaryPropertyList.decode(data).dictionaryValue else { return }
        adoptions.withLock { a in
            for (identifier, value) in table {
                guard existing(identifier), let bytes = value.dataValue, let peer = DeviceID(bytes: bytes) else { continue }
                a.written[identifier] = peer
                a.byPeer[peer, default: []].insert(identifier)
            }
        }
    }

    private func saveIntroductions(_ table: [String: DeviceID]) {
        let path = introductionsPath, logger = logger
        saver.async {
            do {
                let data = try BinaryPropertyList.encode(.dictionary(table.mapValues { .data($0.data) }))
                try AtomicFile.write(data, to: path)
            } catch {
                logger.error("cannot save which peers the stores taken up came from (\(path)): \(error)")
            }
        }
    }

    /// Waits until promotions in flight have ended and what they, ``claim(_:byApp:)`` and
    /// ``served(_:by:)`` saved is on disk. ``stop()`` does; tests call it before reading the
    /// bound back (a store shows in ``adoptedStores`` before its promotion has recorded whom
    /// it counts against).
    package func settle() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            promotions.notify(queue: saver) { done.resume() }
        }
    }

    /// The stores taken up in memory only, by identifier (tests and status).
    package var storesInMemory: [String] { adoptions.withLock { $0.pending.keys.sorted() } }

    /// The engine this syncs with (tests call its store provider as a peer's hello would).
    package var engine: SyncEngine { lease.engine }

    private init(lease: DeviceEngines.Lease, deviceID: String, introductionsPath: String, logger: Logger,
                 locate: @escaping @Sendable (String) -> StoreLocation) {
        self.logger = logger
        self.locate = locate
        self.lease = lease
        self.deviceID = deviceID
        self.introductionsPath = introductionsPath
    }

    /// The port the engine listens on, once it does.
    package var port: Int {
        get async throws { try await lease.started.value }
    }

    /// The stores opened because a peer served them, by identifier.
    package var adoptedStores: [String: UbiquitousKeyValueStore] { adopted.withLock { $0 } }

    /// The account CA unlocked here (the owner entered the passphrase): peers' certificate
    /// renewals are answered for as long as this device syncs (see `SyncEngine.authority`).
    package var authority: AccountAuthority? {
        get { lease.engine.authority }
        set { lease.engine.authority = newValue }
    }

    /// Stops taking up stores and lets go of the engine (it stops with the last store using it).
    package func stop() async {
        lease.engine.storeProvider = nil
        lease.engine.onStoreServed = nil
        let pending = adoptions.withLock { a in
            a.stopped = true
            defer { a.pending = [:] }
            return a.pending
        }
        for (identifier, adoption) in pending {
            adoption.watch.cancel()
            lease.engine.detach(storeIdentifier: identifier)
        }
        // A promotion in flight saves whom its store counts against: on disk before the next start reads it.
        await settle()
        await lease.release()
    }
}
