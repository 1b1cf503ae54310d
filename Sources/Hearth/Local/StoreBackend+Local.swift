import Dispatch
import Foundation
import HearthCore
import HearthIdentity
import Logging
import NIOCore
import NIOPosix

// Two processes of one device on one store (docs/local-attach.md): the process that owns the
// store's file hosts it on a Unix socket, the others attach; when the host goes, one of them
// takes over. Host side first, then the attached side.

extension StoreBackend {
    // MARK: Hosting

    /// Offers the store to other processes of this user. A failure (an unsafe socket folder)
    /// is logged: the store works, and other processes get `storeLocked` as before.
    func startHosting() {
        guard state.withLock({ $0.storage != nil && $0.localHost == nil }) else { return }
        do {
            let host = try LocalHost.start(for: self, dataDirectory: dataDirectory)
            let keep = state.withLock { s -> Bool in
                guard s.storage != nil, s.localHost == nil else { return false }
                s.localHost = host
                return true
            }
            if !keep { host.stop() }
        } catch {
            logger.warning("other processes cannot attach to this store: \(error)", metadata: ["store": "\(storeIdentifier)"])
        }
    }

    /// Stops hosting: the attached processes take over or reattach.
    func stopHosting() {
        state.withLock { s in defer { s.localHost = nil }; return s.localHost }?.stop()
    }

    /// Closes every attached process's connection (after an account switch: each reattaches,
    /// gets the new account's snapshot and posts accountChange).
    func reconnectAttached() {
        state.withLock { $0.localHost }?.closeClients()
    }

    /// What the host had applied of each attached process's writes.
    var attachedApplied: [ReplicaID: UInt64] {
        state.withLock { $0.attachedApplied }
    }

    /// The snapshot a newly attached process gets: every current entry, in parts that fit a frame.
    func attachSnapshot(reason: ChangeReason?) -> [LocalMessage] {
        let (entries, account, device) = state.withLock { s in
            (Array(s.replica.entries.values), s.storage?.location.account ?? "", s.device ?? Data())
        }
        let parts = Self.parts(entries)
        return parts.indices.map { i in
            .snapshot(.init(account: account, device: device, entries: parts[i], more: i < parts.count - 1, reason: reason))
        }
    }

    /// `entries` in groups of at most 4,096 entries and about 1 MB of values (a frame holds 4 MiB).
    static func parts(_ entries: [Entry]) -> [[Entry]] {
        var parts: [[Entry]] = [[]]
        var bytes = 0
        for entry in entries {
            let size = entry.key.utf8.count + (entry.value?.canonicalSize ?? 0)
            if parts[parts.count - 1].count >= 4096 || (bytes + size > 1 << 20 && !parts[parts.count - 1].isEmpty) {
                parts.append([])
                bytes = 0
            }
            parts[parts.count - 1].append(entry)
            bytes += size
        }
        return parts
    }

    /// Applies writes an attached process sent (its own entries, stamped by it), each on its
    /// own: one that breaks ``StoreLimits`` or a quota is refused, the others apply. An entry
    /// at or below what was applied of its origin is one sent again after a reattach: already
    /// here, skipped. Returns what was applied per origin and the refusals.
    func applyAttachedWrites(_ entries: [Entry], undecodable: [RefusedEntry]) -> (applied: VersionVector, refused: [LocalMessage.Refusal]) {
        var refused = undecodable.compactMap { entry -> LocalMessage.Refusal? in
            guard let origin = entry.origin, let sequence = entry.sequence else { return nil }
            return LocalMessage.Refusal(origin: origin, sequence: sequence, key: entry.key?.string ?? "",
                                        code: entry.reason.rawValue, reason: entry.detail)
        }
        let wall = wallMilliseconds()
        let (changed, schedule, handler, applied) = state.withLock { s -> ([StoreKey], Bool, (@Sendable () -> Void)?, VersionVector) in
            var changed: [StoreKey] = []
            var applied = VersionVector()
            var touched = false
            let strict = isStrict(s)
            for entry in entries {
                applied.advance(origin: entry.origin, to: entry.sequence)
                if let done = s.attachedApplied[entry.origin], entry.sequence <= done { continue }
                s.attachedApplied[entry.origin] = entry.sequence
                // The same rules as a write of this process (SyncedReplica.admitLocalWrite).
                do throws(SyncedReplica.LocalRefusal) {
                    changed += try s.replica.applyAttachedWrite(entry, device: s.device, wall: wall, strict: strict)
                    touched = true
                } catch {
                    let error = KeyValueStoreError(error, key: entry.key.string)
                    refused.append(LocalMessage.Refusal(origin: entry.origin, sequence: entry.sequence, key: entry.key.string,
                                                        code: error.code.rawValue, reason: error.reason))
                }
            }
            guard touched else { return ([], false, nil, applied) }
            return (changed, scheduleSave(&s), s.localChangeHandler, applied)
        }
        if schedule { scheduleWriteBehind() }
        handler?()
        // For this process, and (through forwardToAttached) for every attached one.
        if !changed.isEmpty { post(ChangeEvent(reason: .serverChange, keys: changed.map { $0.string })) }
        return (applied, refused)
    }

    /// Sends the entries behind an external change to the attached processes, which post it too.
    /// Quota violations stay with the process whose write was refused; an account switch
    /// reconnects them instead (``reconnectAttached()``).
    func forwardToAttached(_ event: ChangeEvent) {
        guard event.reason == .serverChange || event.reason == .initialSyncChange else { return }
        let (host, entries) = state.withLock { s -> (LocalHost?, [Entry]) in
            guard let host = s.localHost else { return (nil, []) }
            return (host, event.keys.compactMap { s.replica.entries[StoreKey($0)] })
        }
        guard let host, !entries.isEmpty else { return }
        for part in Self.parts(entries) { host.broadcast(.change(event.reason, part)) }
    }

    // MARK: Attaching

    var isAttached: Bool { state.withLock { $0.attachment != nil } }

    /// Opens the store as a process attached to the one that hosts it at `socketPath`: connects,
    /// says hello and waits (until `deadline`) for the snapshot. Throws if no host answers.
    static func attach(storeIdentifier: String, location: StoreLocation, configuration: UbiquitousKeyValueStore.Configuration,
                       deadline: DispatchTime) throws(LocalAttachError) -> StoreBackend {
        let client = LocalClient(socketPath: LocalSocketDirectory.socketPath(dataDirectory: configuration.dataDirectory,
                                                                             storeIdentifier: storeIdentifier),
                                 configuration: configuration)
        let backend = StoreBackend(storeIdentifier: storeIdentifier, storage: nil, replica: Replica(), logger: configuration.logger,
                                   writeBehindDelay: configuration.writeBehindDelay, clockSkew: configuration.clockSkew,
                                   dataDirectory: configuration.dataDirectory)
        var attachment = Attachment(client: client, location: location)
        attachment.reconnecting = true
        backend.state.withLock { $0.attachment = attachment }
        do throws(LocalAttachError) {
            try backend.connectToHost(client, deadline: deadline)
        } catch {
            backend.state.withLock { $0.attachment?.closed = true }
            throw error
        }
        backend.finishReconnecting()
        configuration.logger.debug("attached to the process that hosts the store", metadata: ["store": "\(storeIdentifier)"])
        return backend
    }

    /// One try at reaching the host: connect, hello, wait for the snapshot. Throws if the
    /// connect is refused, the host closes, or no snapshot comes before `deadline`.
    private func connectToHost(_ client: LocalClient, deadline: DispatchTime) throws(LocalAttachError) {
        let channel = try client.connect(for: self)
        state.withLock { s in
            s.attachment?.channel = channel
            s.attachment?.attached = false
        }
        Attachment.send(.hello(.init(version: LocalMessage.protocolVersion, dataDirectory: dataDirectory, store: storeIdentifier,
                                     pid: getpid())), on: channel, logger: logger)
        let attached = client.wait(until: deadline) { () -> Bool? in
            let attached = state.withLock { s in s.attachment.map { $0.attached && $0.channel === channel } ?? false }
            if attached { return true }
            return channel.isActive ? nil : false
        }
        guard attached == true else {
            state.withLock { s in
                if s.attachment?.channel === channel { s.attachment?.channel = nil }
            }
            channel.close(promise: nil)
            throw LocalAttachError(attached == nil ? "the process hosting the store did not answer in time"
                                                   : "the process hosting the store closed the connection")
        }
    }

    /// Ends a reconnection: done if attached now (or hosting), else goes on on its own thread
    /// (the connection was lost again meanwhile).
    private func finishReconnecting() {
        let again = state.withLock { s -> Bool in
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
        let (start, client) = state.withLock { s -> (Bool, LocalClient?) in
            guard var a = s.attachment, a.channel === channel else { return (false, nil) }
            a.channel = nil
            a.attached = false
            let start = !a.closed && !a.reconnecting
            if start { a.reconnecting = true }
            s.attachment = a
            return (start, a.client)
        }
        client?.wake()
        guard start else { return }
        logger.info("the connection to the process hosting the store ended; reattaching or taking over", metadata: ["store": "\(storeIdentifier)"])
        Thread.detachNewThread { [weak self] in self?.reattachOrTakeOver() }
    }

    /// Tries, until it works or the store is closed: take the file's lock (then this process
    /// hosts the store), else attach to whoever holds it. Between tries it waits for the
    /// holder's socket or lock to change (``HolderWatch``), or for the store to be closed.
    private func reattachOrTakeOver() {
        var lastError = ""
        var watch: HolderWatch?
        var watched: LocalClient?
        /// One try at attaching to whoever holds the store; true once attached.
        func reattach(_ client: LocalClient, to holder: String) -> Bool {   // "process hosting", "daemon holding"
            do {
                try connectToHost(client, deadline: .now() + .seconds(5))
                logger.info("reattached to the \(holder) the store", metadata: ["store": "\(storeIdentifier)"])
                finishReconnecting()
                return true
            } catch {
                if error.description != lastError { logger.debug("cannot attach yet: \(error)", metadata: ["store": "\(storeIdentifier)"]) }
                lastError = error.description
                return false
            }
        }
        attempts: while true {
            guard let client = state.withLock({ s in s.attachment.flatMap { $0.closed ? nil : $0.client } }) else { break attempts }
            let configuration = client.configuration
            var lockPath: String?
            /// A failure no event announces (the file unreadable, say): tried again within this.
            var recheck: DispatchTimeInterval?
            if configuration.attach == .required {
                // Only ever the daemon's: wait for it (a restarted daemon holds the store again
                // at its first scan; asking makes that immediate).
                if DaemonHoldRequest.ask(storeIdentifier: storeIdentifier, dataDirectory: dataDirectory),
                   reattach(client, to: "daemon holding") { break attempts }
            } else {
                let identity = StoreRegistry.signedInIdentity(configuration)
                let location = StoreLocation(dataDirectory: dataDirectory, storeIdentifier: storeIdentifier, account: identity?.account.id.hex)
                lockPath = location.lockPath
                // Not while the lock is known to be held: a failed open closes the lock file,
                // an event that would wake this watch (and every other waiter) again and again.
                if watch?.lockPath != location.lockPath || watch?.lockIsHeld != true {
                    do {
                        let (storage, replica) = try Self.openReplica(location, device: identity?.deviceID.data, logger: logger)
                        becomeHost(storage: storage, replica: replica, identity: identity, client: client)
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
                if reattach(client, to: "process hosting") { break attempts }
            }
            guard let current = watch, current.lockPath == lockPath else {
                // Watched from now on (or again, for another account's file), and tried once
                // more before the first wait, so that a change since the tries above is not missed.
                let next = HolderWatch(socketPath: client.socketPath, lockPath: lockPath)
                watch = next
                watched = client
                client.watching(next)
                continue
            }
            current.wait(until: nil, recheckWithin: recheck)
        }
        watched?.watching(nil)
    }

    /// The host is gone and this process holds the file's lock now: the store becomes this
    /// process's own, with everything the attached copy knew merged into the file's replica
    /// (this process's pending writes, and the host's entries it may not have saved), then
    /// hosted for the others, and synced as the host's was.
    private func becomeHost(storage: ReplicaStorage, replica: Replica, identity: DeviceIdentity?, client: LocalClient) {
        let wall = wallMilliseconds()
        let changed = state.withLock { s -> [StoreKey]? in
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
        if !changed.isEmpty { post(ChangeEvent(reason: .serverChange, keys: changed.map(\.string))) }
        // This thread is not the cooperative pool: save now, so the pending writes are durable.
        _ = flush()
        restampIfNeeded()
        startHosting()
        let settings = client.configuration.sync
        if settings.isEnabled {
            if let identity { startSync(identity: identity, settings: settings) }
            watchAccount(settings: settings)
        }
        client.wake()
    }

    static func changedKeys(_ before: [StoreKey: PropertyListValue], _ after: [StoreKey: PropertyListValue]) -> [StoreKey] {
        Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
    }

    // MARK: What the host says

    /// The host's snapshot (at attach, or after it switched accounts): the copy becomes the
    /// host's entries plus this process's pending writes, which are sent (again) in order.
    func installSnapshot(_ entries: [Entry], account: String, device: Data, reason: ChangeReason?, channel: any Channel) {
        let outcome = state.withLock { s -> (ChangeEvent?, LocalClient)? in
            guard var a = s.attachment, a.channel === channel else { return nil }
            let before = a.everAttached ? s.replica.visibleValues : nil
            a.confirmed = [:]
            for entry in entries where a.confirmed[entry.key].map({ entry.wins(over: $0) }) ?? true {
                a.confirmed[entry.key] = entry
            }
            let accountChanged = a.everAttached && (a.location.account ?? "") != account
            a.location = StoreLocation(dataDirectory: dataDirectory, storeIdentifier: storeIdentifier, account: account.isEmpty ? nil : account)
            // Writes go under an origin bound to the host's device, so peers take what it signs.
            let origin: ReplicaID? = !a.everAttached || a.device != device ? (device.isEmpty ? .random() : .random(boundTo: device)) : nil
            a.device = device
            s.replica.replace(with: a.view(from: s.replica.replica, origin: origin))
            a.attached = true
            a.everAttached = true
            // Every pending write again, in order; the unsent ones are among them.
            a.pending.markAllSent()
            for message in Attachment.writeMessages(a.pending.entries) { Attachment.send(message, on: channel, logger: logger) }
            s.attachment = a
            guard let before else { return (nil, a.client) }
            let changed = Self.changedKeys(before, s.replica.visibleValues)
            guard !changed.isEmpty else { return (nil, a.client) }
            return (ChangeEvent(reason: reason ?? (accountChanged ? .accountChange : .serverChange), keys: changed.map(\.string)), a.client)
        }
        guard let (event, client) = outcome else { return }
        if let event { post(event) }
        client.wake()
    }

    /// Sends the writes queued since the last flush, as few messages as their size allows (on
    /// the event loop of the connection they were queued for). A connection replaced meanwhile
    /// gets them on the new one if it is attached; otherwise the snapshot's resend carries them.
    func flushOutbox() {
        let (entries, channel) = state.withLock { s -> ([Entry], (any Channel)?) in
            guard s.attachment != nil else { return ([], nil) }
            s.attachment!.outboxScheduled = false
            s.attachment!.lastFlush = DispatchTime.now().uptimeNanoseconds
            let entries = s.attachment!.pending.takeUnsent()
            guard s.attachment!.attached, let channel = s.attachment!.channel else { return ([], nil) }
            return (entries, channel)
        }
        guard let channel, !entries.isEmpty else { return }
        // A key written again before this flush: only its last write goes (it wins anyway, and
        // the host takes sequences with gaps). The rest keep their order.
        var seen = Set<StoreKey>()
        var latest: [Entry] = []
        for entry in entries.reversed() where seen.insert(entry.key).inserted { latest.append(entry) }
        for message in Attachment.writeMessages(latest.reversed()) {
            do {
                channel.writeAndFlush(ByteBuffer(bytes: try message.encoded()), promise: nil)
            } catch {
                // Never expected (entries are checked against StoreLimits first); the writes stay
                // pending and go again after a reattach.
                logger.error("cannot encode a message for the host: \(error)", metadata: ["store": "\(storeIdentifier)"])
                channel.close(promise: nil)
                return
            }
        }
    }

    /// Entries that changed at the host (another process's write, a peer's): merged into the
    /// copy, and posted with the keys whose visible value changed here.
    func applyHostChange(_ entries: [Entry], reason: ChangeReason, channel: any Channel) {
        let wall = wallMilliseconds()
        let changed = state.withLock { s -> [StoreKey] in
            guard var a = s.attachment, a.channel === channel, a.attached else { return [] }
            for entry in entries where a.confirmed[entry.key].map({ entry.wins(over: $0) }) ?? true {
                a.confirmed[entry.key] = entry
            }
            s.attachment = a
            return s.replica.applyAdmitted(entries, coveredBy: nil, wall: wall)
        }
        if !changed.isEmpty { post(ChangeEvent(reason: reason, keys: changed.map(\.string))) }
    }

    /// The host saved this process's writes up to `vector`: they need not be sent again.
    func hostDurable(_ vector: VersionVector) {
        let client = state.withLock { s -> LocalClient? in
            s.attachment?.pending.removeDurable(vector)
            return s.attachment?.client
        }
        client?.wake()
    }

    func hostSynchronized(_ id: UInt64, saved: Bool) {
        let client = state.withLock { s -> LocalClient? in
            s.attachment?.synchronized[id] = saved
            return s.attachment?.client
        }
        client?.wake()
    }

    /// The host refused one of this process's writes: it leaves the copy (the key shows the
    /// host's value again), and is posted as Apple posts a refused write.
    func hostRefused(_ refusal: LocalMessage.Refusal, channel: any Channel) {
        let outcome = state.withLock { s -> ([StoreKey], LocalClient)? in
            guard var a = s.attachment else { return nil }
            let before = s.replica.visibleValues
            a.pending.remove { $0.origin == refusal.origin && $0.sequence == refusal.sequence }
            s.replica.replace(with: a.view(from: s.replica.replica))
            s.attachment = a
            return (Self.changedKeys(before, s.replica.visibleValues), a.client)
        }
        guard let (changed, client) = outcome else { return }
        let error = KeyValueStoreError(code: .init(rawValue: refusal.code), key: refusal.key, reason: refusal.reason)
        logger.error("write refused by the process hosting the store: \(error)", metadata: ["store": "\(storeIdentifier)", "code": "\(error.code)"])
        if error.isQuotaViolation {
            post(ChangeEvent(reason: .quotaViolationChange, keys: [refusal.key]))
        } else if error.code == .initialSyncPending {
            post(ChangeEvent(reason: .initialSyncChange, keys: [refusal.key]))
        } else if !changed.isEmpty {
            post(ChangeEvent(reason: .serverChange, keys: changed.map(\.string)))
        }
        client.wake()
    }

    // MARK: Synchronize and close, attached

    /// Asks the host to save and waits until every write this process made before the call is
    /// on disk (or, if this process took over meanwhile, saves itself). False if that does not
    /// happen within `timeout` or the host could not save.
    func synchronizeAttached(timeout: Duration = .seconds(10)) -> Bool {
        enum Step { case hosting, done(Bool) }
        guard let (client, target) = state.withLock({ s -> (LocalClient, [ReplicaID: UInt64])? in
            guard s.attachment != nil else { return nil }
            // Until this returns, the writes it waits for stay pending, not replaced by later ones.
            s.attachment!.pending.synchronizing += 1
            var target: [ReplicaID: UInt64] = [:]
            for entry in s.attachment!.pending.entries { target[entry.origin] = max(target[entry.origin] ?? 0, entry.sequence) }
            return (s.attachment!.client, target)
        }) else { return flush() }
        defer { state.withLock { $0.attachment?.pending.synchronizing -= 1 } }
        var request: (channel: ObjectIdentifier, id: UInt64)?
        let step = client.wait(until: .now() + .nanoseconds(Int(timeout.nanoseconds))) { () -> Step? in
            state.withLock { s -> Step? in
                guard var a = s.attachment else { return .hosting }
                if a.closed { return .done(false) }
                defer { s.attachment = a }
                let written = !a.pending.entries.contains { entry in target[entry.origin].map { entry.sequence <= $0 } ?? false }
                if let asked = request, let channel = a.channel, ObjectIdentifier(channel) == asked.channel,
                   let saved = a.synchronized.removeValue(forKey: asked.id) {
                    if !saved { return .done(false) }
                    if written { return .done(true) }
                    request = nil
                }
                if a.attached, let channel = a.channel, request?.channel != ObjectIdentifier(channel) {
                    a.nextRequest &+= 1
                    request = (ObjectIdentifier(channel), a.nextRequest)
                    // Writes waiting for their batch's flush leave now, ahead of the request.
                    if a.outboxScheduled { channel.eventLoop.execute { [weak self] in self?.flushOutbox() } }
                    Attachment.send(.synchronize(a.nextRequest), on: channel, logger: logger)
                }
                return nil
            }
        }
        switch step {
        case .hosting?: return flush()
        case .done(let saved)?: return saved
        case nil:
            let (waiting, attached) = state.withLock { s in
                (s.attachment.map { a in a.pending.entries.filter { entry in target[entry.origin].map { entry.sequence <= $0 } ?? false }.count } ?? 0,
                 s.attachment?.attached ?? false)
            }
            logger.warning("synchronize: the process hosting the store did not confirm the writes within \(timeout) (\(waiting) writes not durable, \(attached ? "attached" : "not attached"), \(request == nil ? "no request pending" : "a request unanswered"))",
                           metadata: ["store": "\(storeIdentifier)"])
            return false
        }
    }

    /// Detaches from `deinit`. No answer of the host can reach this object any more (the
    /// connection's handler holds it weakly), so a synchronize would only wait for its timeout:
    /// the writes not sent yet leave now, then the connection closes; the host saves them with
    /// its own write-behind. Waits (at most a second) until they are in the socket, unless
    /// called on an event loop, so that a process exiting right after does not lose them; on
    /// an event loop they leave after this returns, and ``release`` (which the exit hook waits
    /// for) is finished once they are out. Returns whether the store was attached (``release``
    /// is left to the caller otherwise).
    func detachFromDeinit() -> Bool {
        let outcome = state.withLock { s -> (channel: (any Channel)?, entries: [Entry], stranded: Int)? in
            guard s.attachment != nil else { return nil }
            s.attachment!.closed = true
            guard s.attachment!.attached, let channel = s.attachment!.channel else {
                return (s.attachment!.channel, [], s.attachment!.pending.count)
            }
            return (channel, s.attachment!.pending.takeUnsent(), 0)
        }
        guard let (channel, entries, stranded) = outcome else { return false }
        // A thread reattaching or taking over stops waiting for the holder.
        state.withLock { $0.attachment?.client }?.wake()
        if stranded > 0 {
            logger.warning("the store was released while reattaching to the process hosting it; \(stranded) writes it had not confirmed may be lost",
                           metadata: ["store": "\(storeIdentifier)"])
        }
        let release = release
        guard let channel else {
            release.finish()
            return true
        }
        let messages = Attachment.writeMessages(entries).compactMap { try? $0.encoded() }
        let sent = channel.eventLoop.submit {
            for message in messages { channel.write(ByteBuffer(bytes: message), promise: nil) }
            channel.flush()
        }.flatMap { channel.close() }
        sent.whenComplete { _ in release.finish() }
        if MultiThreadedEventLoopGroup.currentEventLoop == nil { _ = release.wait(until: .now() + .seconds(1)) }
        return true
    }

    /// Detaches for good: what is pending goes to the host first (when `synchronize`), then the
    /// connection closes and this process neither reattaches nor takes over. Returns whether
    /// the store was attached.
    @discardableResult
    func detach(synchronize: Bool) -> Bool {
        guard state.withLock({ $0.attachment != nil }) else { return false }
        if synchronize { _ = synchronizeAttached() }
        let (channel, client) = state.withLock { s -> ((any Channel)?, LocalClient?) in
            s.attachment?.closed = true
            return (s.attachment?.channel, s.attachment?.client)
        }
        // A thread reattaching or taking over stops waiting for the holder.
        client?.wake()
        channel?.close(promise: nil)
        return true
    }
}
