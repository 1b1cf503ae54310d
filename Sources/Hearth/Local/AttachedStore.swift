import Dispatch
import Foundation
import HearthCore
import HearthIdentity
import Logging
import NIOCore
import NIOPosix

/// The attached side of local attach (docs/local-attach.md): a store whose file another
/// process of this user holds. It connects to that process and keeps the in-process copy
/// current, sends this process's writes in order, answers `synchronize()`, and, when the host
/// goes, reattaches or takes the store over.
///
/// The copy (``Attachment``: the host's entries, the pending writes, the connection) is the
/// store's replica, so it sits behind the store's one lock: a write and its place in the queue
/// to the host are one step, and writes leave in sequence order. This type's own state is its
/// ``LocalClient`` (the socket, the configuration, the threads waiting for the host), behind
/// the client's locks, never taken while the store's is held.
final class AttachedStore: Sendable {
    /// The store this process attached. Weak: the store owns its attachment.
    weak let backend: StoreBackend?
    let client: LocalClient
    let storeIdentifier: String
    let dataDirectory: String
    let logger: Logger

    /// Made by ``attach(storeIdentifier:location:configuration:group:deadline:)``; tests make one to
    /// drive an ``Attachment`` without a host.
    init(backend: StoreBackend, client: LocalClient) {
        self.backend = backend
        self.client = client
        storeIdentifier = backend.storeIdentifier
        dataDirectory = backend.dataDirectory
        logger = backend.logger
    }

    /// Opens the store as a process attached to the one that hosts it: connects, says hello
    /// and waits (until `deadline`) for the snapshot. Throws if no host answers.
    static func attach(storeIdentifier: String, location: StoreLocation, configuration: UbiquitousKeyValueStore.Configuration,
                       group: any EventLoopGroup, deadline: DispatchTime) throws(LocalAttachError) -> StoreBackend {
        let client = LocalClient(socketPath: LocalSocketDirectory.socketPath(dataDirectory: configuration.dataDirectory,
                                                                             storeIdentifier: storeIdentifier),
                                 configuration: configuration, group: group)
        let backend = StoreBackend(storeIdentifier: storeIdentifier, storage: nil, replica: Replica(), logger: configuration.logger,
                                   writeBehindDelay: configuration.writeBehindDelay, wall: configuration.wallClock,
                                   dataDirectory: configuration.dataDirectory)
        let attached = AttachedStore(backend: backend, client: client)
        var attachment = Attachment(store: attached, location: location)
        attachment.reconnecting = true
        backend.state.withLock { $0.attachment = attachment }
        do throws(LocalAttachError) {
            try attached.connectToHost(backend, deadline: deadline)
        } catch {
            backend.state.withLock { $0.attachment?.closed = true }
            throw error
        }
        attached.finishReconnecting(backend)
        configuration.logger.debug("attached to the process that hosts the store", metadata: ["store": "\(storeIdentifier)"])
        return backend
    }

    // MARK: Reaching the host

    /// One try at reaching the host: connect, hello, wait for the snapshot. Throws if the
    /// connect is refused, the host closes, or no snapshot comes before `deadline`.
    private func connectToHost(_ backend: StoreBackend, deadline: DispatchTime) throws(LocalAttachError) {
        let channel = try client.connect(for: self)
        backend.state.withLock { s in
            s.attachment?.channel = channel
            s.attachment?.attached = false
        }
        Attachment.send(.hello(.init(version: LocalMessage.protocolVersion, dataDirectory: dataDirectory, store: storeIdentifier,
                                     pid: getpid())), on: channel, logger: logger)
        let attached = client.wait(until: deadline) { () -> Bool? in
            let attached = backend.state.withLock { s in s.attachment.map { $0.attached && $0.channel === channel } ?? false }
            if attached { return true }
            return channel.isActive ? nil : false
        }
        guard attached == true else {
            backend.state.withLock { s in
                if s.attachment?.channel === channel { s.attachment?.channel = nil }
            }
            channel.close(promise: nil)
            throw LocalAttachError(.notServed, attached == nil ? "the process hosting the store did not answer in time"
                                                               : "the process hosting the store closed the connection")
        }
    }

    /// Ends a reconnection: done if attached now (or hosting), else goes on on its own thread
    /// (the connection was lost again meanwhile).
    private func finishReconnecting(_ backend: StoreBackend) {
        let again = backend.state.withLock { s -> Bool in
            guard var a = s.attachment else { return false }
            if a.closed || (a.attached && a.channel != nil) {
                a.reconnecting = false
                s.attachment = a
                return false
            }
            return true
        }
        if again { Thread.detachNewThread { [weak self] in self?.reattachOrTakeOver() } }
    }

    /// Called when the connection to the host ends: reattach to the host, or take over if it
    /// is gone, on a thread of its own (opening the file blocks).
    func hostConnectionLost(_ channel: any Channel) {
        guard let backend else { return client.wake() }
        let start = backend.state.withLock { s -> Bool in
            guard var a = s.attachment, a.channel === channel else { return false }
            a.channel = nil
            a.attached = false
            let start = !a.closed && !a.reconnecting
            if start { a.reconnecting = true }
            s.attachment = a
            return start
        }
        client.wake()
        guard start else { return }
        logger.info("the connection to the process hosting the store ended; reattaching or taking over", metadata: ["store": "\(storeIdentifier)"])
        Thread.detachNewThread { [weak self] in self?.reattachOrTakeOver() }
    }

    /// Tries, until it works or the store is closed: take the file's lock (then this process
    /// hosts the store), else attach to whoever holds it. Between tries it waits for the
    /// holder's socket or lock to change (``HolderWatch``), or for the store to be closed.
    private func reattachOrTakeOver() {
        // Held for the whole loop, as the store's own thread: it ends once the store is closed.
        guard let backend else { return }
        var lastError = ""
        var watch: HolderWatch?
        /// One try at attaching to whoever holds the store; true once attached.
        func reattach(to holder: String) -> Bool {   // "process hosting", "daemon holding"
            do {
                try connectToHost(backend, deadline: .now() + .seconds(5))
                logger.info("reattached to the \(holder) the store", metadata: ["store": "\(storeIdentifier)"])
                finishReconnecting(backend)
                return true
            } catch {
                if error.description != lastError { logger.debug("cannot attach yet: \(error)", metadata: ["store": "\(storeIdentifier)"]) }
                lastError = error.description
                return false
            }
        }
        attempts: while backend.state.withLock({ s in s.attachment.map { !$0.closed } ?? false }) {
            let configuration = client.configuration
            var lockPath: String?
            /// A failure no event announces (the file unreadable, say): tried again within this.
            var recheck: DispatchTimeInterval?
            if configuration.attach == .required {
                // Only ever the daemon's: wait for it (a restarted daemon holds the store again
                // at its first scan; asking makes that immediate).
                if DaemonHoldRequest.ask(storeIdentifier: storeIdentifier, dataDirectory: dataDirectory),
                   reattach(to: "daemon holding") { break attempts }
            } else {
                let identity = StoreTable.signedInIdentity(configuration)
                let location = StoreLocation(dataDirectory: dataDirectory, storeIdentifier: storeIdentifier, account: identity?.account.id.hex)
                lockPath = location.lockPath
                // Not while the lock is known to be held: a failed open closes the lock file,
                // an event that would wake this watch (and every other waiter) again and again.
                if watch?.lockPath != location.lockPath || watch?.lockIsHeld != true {
                    do {
                        let (storage, replica) = try ReplicaStorage.open(location, on: SystemDisk(), device: identity?.deviceID.data,
                                                                          logger: logger, wall: backend.wall,
                                                                          random: configuration.randomBits)
                        becomeHost(backend, storage: storage, replica: replica, identity: identity)
                        break attempts
                    } catch where error.code == .locked {
                    } catch {
                        if error.description != lastError {
                            logger.error("cannot take over the store: \(error); trying again", metadata: ["store": "\(storeIdentifier)"])
                        }
                        lastError = error.description
                        recheck = .milliseconds(500)
                    }
                }
                if reattach(to: "process hosting") { break attempts }
            }
            guard let current = watch, current.lockPath == lockPath else {
                // Watched from now on (or again, for another account's file), and tried once
                // more before the first wait, so that a change since the tries above is not missed.
                let next = HolderWatch(socketPath: client.socketPath, lockPath: lockPath)
                watch = next
                client.watching(next)
                continue
            }
            current.wait(until: nil, recheckWithin: recheck)
        }
        if watch != nil { client.watching(nil) }
    }

    /// The host is gone and this process holds the file's lock now: the store becomes this
    /// process's own, with everything the attached copy knew merged into the file's replica
    /// (this process's pending writes, and the host's entries it may not have saved), then
    /// hosted for the others, and synced as the host's was.
    private func becomeHost(_ backend: StoreBackend, storage: ReplicaStorage, replica: Replica, identity: DeviceIdentity?) {
        let wall = backend.wallMilliseconds()
        let changed = backend.state.withLock { s -> [StoreKey]? in
            guard let a = s.attachment, !a.closed else { return nil }
            let before = s.replica.visibleValues
            var next = replica
            // The host's entries as this process last heard them: merged by last-writer-wins,
            // without claiming their origins' counters (peers send what else they have).
            for entry in a.confirmed.values { next.merge(entry, wall: wall) }
            next.apply(Array(a.pending.entries), coveredBy: nil, wall: wall)
            if let device = identity?.deviceID.data { next.adoptUnboundEntries(of: device) }
            s.replica.replace(with: next)
            s.storage = storage
            s.device = identity?.deviceID.data
            s.attachment = nil
            s.flushScheduled = false
            s.generation &+= 1
            return Self.changedKeys(before, next.visibleValues)
        }
        guard let changed else { return }   // closed meanwhile: dropping `storage` releases the lock
        logger.notice("took over the store: the process that hosted it is gone; this process hosts it now",
                      metadata: ["store": "\(storeIdentifier)", "pid": "\(getpid())"])
        if !changed.isEmpty { backend.post(ChangeEvent(reason: .serverChange, keys: changed.map(\.string))) }
        // This thread is not the cooperative pool: save now, so the pending writes are durable.
        _ = backend.flush()
        backend.restampIfNeeded()
        backend.startHosting(on: client.group)
        let settings = client.configuration.sync
        if settings.isEnabled {
            if let identity { backend.startSync(identity: identity, settings: settings) }
            backend.sync.watchAccount(settings: settings)
        }
        client.wake()
    }

    static func changedKeys(_ before: [StoreKey: PropertyListValue], _ after: [StoreKey: PropertyListValue]) -> [StoreKey] {
        Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
    }
}
