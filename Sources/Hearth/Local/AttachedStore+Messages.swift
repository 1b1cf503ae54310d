import Dispatch
import Foundation
import HearthCore
import Logging
import NIOCore
import NIOPosix

// What the host says to an attached store, the writes it sends, and how it synchronizes and
// lets go.

extension AttachedStore {
    // MARK: What the host says

    /// The host's snapshot (at attach, or after it switched accounts): the copy becomes the
    /// host's entries plus this process's pending writes, which are sent (again) in order.
    func installSnapshot(_ entries: [Entry], account: String, device: Data, reason: ChangeReason?, channel: any Channel) {
        guard let backend else { return }
        let outcome = backend.state.withLock { s -> ChangeEvent?? in
            guard var a = s.attachment, a.channel === channel else { return nil }
            let before = a.everAttached ? s.replica.visibleValues : nil
            a.confirmed = [:]
            a.confirm(entries)
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
            guard let before else { return .some(nil) }
            let changed = Self.changedKeys(before, s.replica.visibleValues)
            guard !changed.isEmpty else { return .some(nil) }
            return ChangeEvent(reason: reason ?? (accountChanged ? .accountChange : .serverChange), keys: changed.map(\.string))
        }
        guard let outcome else { return }
        if let event = outcome { backend.post(event) }
        client.wake()
    }

    /// Queues a flush of the outbox on `channel`'s event loop, `delay` nanoseconds from now
    /// (``Attachment/enqueue(_:)`` returns it; the writer calls it once out of the store's lock).
    func scheduleFlush(on channel: any Channel, in delay: UInt64) {
        if delay == 0 {
            channel.eventLoop.execute { [weak self] in self?.flushOutbox() }
        } else {
            channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(delay))) { [weak self] in self?.flushOutbox() }
        }
    }

    /// Sends the writes queued since the last flush, as few messages as their size allows (on
    /// the event loop of the connection they were queued for). A connection replaced meanwhile
    /// gets them on the new one if it is attached; otherwise the snapshot's resend carries them.
    func flushOutbox() {
        guard let backend else { return }
        let (entries, channel) = backend.state.withLock { s -> ([Entry], (any Channel)?) in
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
        guard let backend else { return }
        let wall = backend.wallMilliseconds()
        let changed = backend.state.withLock { s -> [StoreKey] in
            // Read and changed in place: a copy of the attachment would copy `confirmed` at every change.
            guard s.attachment?.attached == true, let current = s.attachment?.channel, current === channel else { return [] }
            s.attachment!.confirm(entries)
            return s.replica.applyAdmitted(entries, coveredBy: nil, wall: wall)
        }
        if !changed.isEmpty { backend.post(ChangeEvent(reason: reason, keys: changed.map(\.string))) }
    }

    /// The host saved this process's writes up to `vector`: they need not be sent again, and
    /// are the host's entries now (it sent no change for them).
    func hostDurable(_ vector: VersionVector) {
        backend?.state.withLock { s in
            guard let durable = s.attachment?.pending.removeDurable(vector), !durable.isEmpty else { return }
            s.attachment!.confirm(durable)
        }
        client.wake()
    }

    func hostSynchronized(_ id: UInt64, saved: Bool) {
        backend?.state.withLock { $0.attachment?.synchronized[id] = saved }
        client.wake()
    }

    /// The host refused one of this process's writes: it leaves the copy (the key shows the
    /// host's value again), and is posted as Apple posts a refused write.
    func hostRefused(_ refusal: LocalMessage.Refusal, channel: any Channel) {
        guard let backend else { return }
        let changed = backend.state.withLock { s -> [StoreKey]? in
            guard var a = s.attachment else { return nil }
            let before = s.replica.visibleValues
            a.pending.remove { $0.origin == refusal.origin && $0.sequence == refusal.sequence }
            s.replica.replace(with: a.view(from: s.replica.replica))
            s.attachment = a
            return Self.changedKeys(before, s.replica.visibleValues)
        }
        guard let changed else { return }
        let error = KeyValueStoreError(code: .init(rawValue: refusal.code), key: refusal.key, reason: refusal.reason)
        logger.error("write refused by the process hosting the store: \(error)", metadata: ["store": "\(storeIdentifier)", "code": "\(error.code)"])
        if error.isQuotaViolation {
            backend.post(ChangeEvent(reason: .quotaViolationChange, keys: [refusal.key]))
        } else if error.code == .initialSyncPending {
            backend.post(ChangeEvent(reason: .initialSyncChange, keys: [refusal.key]))
        } else if !changed.isEmpty {
            backend.post(ChangeEvent(reason: .serverChange, keys: changed.map(\.string)))
        }
        client.wake()
    }

    // MARK: Synchronize and close

    /// Asks the host to save and waits until every write this process made before the call is
    /// on disk (or, if this process took over meanwhile, saves itself). False if that does not
    /// happen within `timeout` or the host could not save.
    func synchronize(timeout: Duration = .seconds(10)) -> Bool {
        enum Step { case hosting, done(Bool) }
        guard let backend else { return false }
        guard let target = backend.state.withLock({ s -> [ReplicaID: UInt64]? in
            guard s.attachment != nil else { return nil }
            // Until this returns, the writes it waits for stay pending, not replaced by later ones.
            s.attachment!.pending.synchronizing += 1
            var target: [ReplicaID: UInt64] = [:]
            for entry in s.attachment!.pending.entries { target[entry.origin] = max(target[entry.origin] ?? 0, entry.sequence) }
            return target
        }) else { return backend.flush() }
        defer { backend.state.withLock { $0.attachment?.pending.synchronizing -= 1 } }
        var request: (channel: ObjectIdentifier, id: UInt64)?
        let step = client.wait(until: .now() + .nanoseconds(Int(timeout.nanoseconds))) { () -> Step? in
            backend.state.withLock { s -> Step? in
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
        case .hosting?: return backend.flush()
        case .done(let saved)?: return saved
        case nil:
            let (waiting, attached) = backend.state.withLock { s in
                (s.attachment.map { a in a.pending.entries.filter { entry in target[entry.origin].map { entry.sequence <= $0 } ?? false }.count } ?? 0,
                 s.attachment?.attached ?? false)
            }
            logger.warning("synchronize: the process hosting the store did not confirm the writes within \(timeout) (\(waiting) writes not durable, \(attached ? "attached" : "not attached"), \(request == nil ? "no request pending" : "a request unanswered"))",
                           metadata: ["store": "\(storeIdentifier)"])
            return false
        }
    }

    /// Detaches from `backend`'s `deinit` (passed in: the weak reference reads nil by then).
    /// No answer of the host can reach the store any more (the connection's handler holds this
    /// weakly), so a synchronize would only wait for its timeout: the writes not sent yet leave
    /// now, then the connection closes; the host saves them with its own write-behind. Waits (at
    /// most a second) until they are in the socket, unless called on an event loop, so that a
    /// process exiting right after does not lose them; on an event loop they leave after this
    /// returns, and the store's `release` (which the exit hook waits for) is finished once they
    /// are out.
    func detach(fromDeinitOf backend: StoreBackend) {
        let (channel, entries, stranded) = backend.state.withLock { s -> ((any Channel)?, [Entry], Int) in
            guard s.attachment != nil else { return (nil, [], 0) }
            s.attachment!.closed = true
            guard s.attachment!.attached, let channel = s.attachment!.channel else {
                return (s.attachment!.channel, [], s.attachment!.pending.count)
            }
            return (channel, s.attachment!.pending.takeUnsent(), 0)
        }
        // A thread reattaching or taking over stops waiting for the holder.
        client.wake()
        if stranded > 0 {
            logger.warning("the store was released while reattaching to the process hosting it; \(stranded) writes it had not confirmed may be lost",
                           metadata: ["store": "\(storeIdentifier)"])
        }
        let release = backend.release
        guard let channel else {
            release.finish()
            return
        }
        let messages = Attachment.writeMessages(entries).compactMap { try? $0.encoded() }
        let sent = channel.eventLoop.submit {
            for message in messages { channel.write(ByteBuffer(bytes: message), promise: nil) }
            channel.flush()
        }.flatMap { channel.close() }
        sent.whenComplete { _ in release.finish() }
        if MultiThreadedEventLoopGroup.currentEventLoop == nil { _ = release.wait(until: .now() + .seconds(1)) }
    }

    /// Detaches for good: what is pending goes to the host first (when `synchronize`), then the
    /// connection closes and this process neither reattaches nor takes over.
    func detach(synchronize: Bool) {
        if synchronize { _ = self.synchronize() }
        let channel = backend?.state.withLock { s -> (any Channel)? in
            s.attachment?.closed = true
            return s.attachment?.channel
        }
        // A thread reattaching or taking over stops waiting for the holder.
        client.wake()
        channel?.close(promise: nil)
    }
}
