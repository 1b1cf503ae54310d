import Foundation
import HearthCore
import HearthTransport
import Logging
import NIOCore
import NIOPosix

/// The host side of local attach (docs/local-attach.md): the Unix socket on which the process
/// that owns a store's file serves it to the other processes of this user that open the same
/// store, the attached clients, and what the store does for them (their snapshot, their
/// writes, the changes they are sent).
///
/// Each accepted connection gets a ``LocalHostHandler`` (on its NIO event loop): peer
/// credentials checked, then the hello, a snapshot, and the client's writes. Changes of the
/// store reach every attached client through ``broadcast(_:)``, from whatever thread made
/// them: a NIO channel write only queues, it never blocks.
///
/// Its own state (the clients) sits behind its own lock; the store's replica, and what was
/// applied of each client's writes, behind the store's. Neither lock is taken while the other
/// is held, and no channel operation runs under either beyond queueing.
final class StoreHost: Sendable {
    /// One attached client (after its hello).
    struct Client: Sendable {
        let channel: any Channel
        let pid: Int32
        /// The origins it has written under: its durable acknowledgements name these.
        var origins: Set<ReplicaID> = []
        /// What it was last told is on disk: a save or a synchronize answer that adds nothing
        /// for it sends it nothing.
        var durable = VersionVector()
    }

    let path: String
    /// The listening channel, on the device's event loop group.
    let server: any Channel
    private let clients = Locked<[ObjectIdentifier: Client]>([:])
    private let stopped = Locked(false)
    let logger: Logger
    /// The store served. Weak: the store owns its host (and stops it in its deinit).
    weak let backend: StoreBackend?

    /// `server`: the listening channel (``start(for:dataDirectory:group:)``); tests give a stand-in.
    init(path: String, server: any Channel, backend: StoreBackend) {
        self.path = path
        self.server = server
        self.backend = backend
        logger = backend.logger
    }

    /// Offers `backend`'s store to other processes of this user, unless it hosts already or
    /// owns no file. The socket and its connections run on `group`, the store's device's (several
    /// devices in one process share no event loop unless their makers give them one). A failure
    /// (an unsafe socket folder) is logged: the store works, and other processes get
    /// `storeLocked` as before.
    static func offer(_ backend: StoreBackend, on group: any EventLoopGroup) {
        guard backend.state.withLock({ $0.storage != nil && $0.localHost == nil }) else { return }
        do {
            let host = try start(for: backend, dataDirectory: backend.dataDirectory, group: group)
            let keep = backend.state.withLock { s -> Bool in
                guard s.storage != nil, s.localHost == nil else { return false }
                s.localHost = host
                return true
            }
            if !keep { host.stop() }
        } catch {
            backend.logger.warning("other processes cannot attach to this store: \(error)", metadata: ["store": "\(backend.storeIdentifier)"])
        }
    }

    /// Listens on the store's socket for `backend`, replacing a socket file left by an earlier
    /// host (this process holds the store's lock now, so that one is gone). Blocks for the bind
    /// only (microseconds). Throws why it cannot.
    private static func start(for backend: StoreBackend, dataDirectory: String, group: any EventLoopGroup) throws -> StoreHost {
        let path = LocalSocketDirectory.socketPath(dataDirectory: dataDirectory, storeIdentifier: backend.storeIdentifier)
        try LocalSocketDirectory.prepare((path as NSString).deletingLastPathComponent)
        // Bound under a name of its own, and renamed into place once it listens: a process
        // waiting for the socket to appear (``HolderWatch``) connects after the rename, never
        // between the bind and the listen, where the connect would be refused.
        let bound = String(path.dropLast(5)) + ".next"   // as long as ".sock": fits where it does
        let fd = try listeningSocket(bound)
        let hostBox = Locked<StoreHost?>(nil)
        let server: any Channel
        do {
            server = try ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 64)
                .childChannelInitializer { [weak backend] channel in
                    channel.eventLoop.makeCompletedFuture {
                        guard let backend, let host = hostBox.withLock({ $0 }) else {
                            channel.close(promise: nil)
                            return
                        }
                        let pipeline = channel.pipeline.syncOperations
                        try pipeline.addHandler(ByteToMessageHandler(FrameDecoder(maximumLength: Frame.maximumLength)))
                        try pipeline.addHandler(FrameEncoder(maximumLength: Frame.maximumLength))
                        try pipeline.addHandler(LocalHostHandler(host: host, backend: backend))
                    }
                }
                .withBoundSocket(fd)
                .wait()
        } catch {
            unlink(bound)
            throw LocalAttachError("cannot listen on \(path): \(error)")
        }
        // Ready before the socket is in place: a process woken by the rename connects at once,
        // and a connection accepted before the host is set is closed (a waiter whose attach
        // failed that way had no event left to wake it: it slept to its deadline).
        let host = StoreHost(path: path, server: server, backend: backend)
        hostBox.withLock { $0 = host }
        // Replaces a socket left by a host that died, in one step.
        guard rename(bound, path) == 0 else {
            let code = errno
            hostBox.withLock { $0 = nil }
            unlink(bound)
            server.close(promise: nil)
            throw LocalAttachError("cannot listen on \(path): rename: \(String(cString: strerror(code)))")
        }
        backend.logger.debug("hosting the store for other processes", metadata: ["store": "\(backend.storeIdentifier)", "socket": "\(path)"])
        return host
    }

    /// A listening Unix socket at `path`, close-on-exec (NIO's own bind is not: a child the app
    /// spawns would keep it, and a client would connect to a socket nobody answers).
    private static func listeningSocket(_ path: String) throws -> NIOBSDSocket.Handle {
        guard var address = LocalSocketDirectory.address(path) else { throw LocalAttachError("socket path too long: \(path)") }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw LocalAttachError("socket: \(String(cString: strerror(errno)))") }
        unlink(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw LocalAttachError("bind \(path): \(String(cString: strerror(code)))")
        }
        // Owner only, whatever the umask: the folder already keeps others out; this says it twice.
        // Not by setting the umask around bind: it is the process's, and a folder another thread
        // made meanwhile came out 0600 (found under ThreadSanitizer).
        guard chmod(path, 0o600) == 0 else {
            let code = errno
            close(fd)
            throw LocalAttachError("chmod \(path): \(String(cString: strerror(code)))")
        }
        return fd
    }

    // MARK: Clients

    /// Records an attached client; returns false once stopped (the handler then closes it).
    func register(_ channel: any Channel, pid: Int32) -> Bool {
        guard !stopped.withLock({ $0 }) else { return false }
        clients.withLock { $0[ObjectIdentifier(channel)] = Client(channel: channel, pid: pid) }
        return true
    }

    func unregister(_ channel: any Channel) {
        clients.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    func noteOrigins(_ origins: some Sequence<ReplicaID>, of channel: any Channel) {
        clients.withLock { $0[ObjectIdentifier(channel)]?.origins.formUnion(origins) }
    }

    var clientCount: Int { clients.withLock { $0.count } }

    /// Sends `message` to every attached client but `writer` (a change goes to the processes
    /// that did not make it: the writer has it in its copy already, and Apple's store tells no
    /// process of its own writes).
    func broadcast(_ message: LocalMessage, except writer: (any Channel)? = nil) {
        let skipped = writer.map(ObjectIdentifier.init)
        let targets = clients.withLock { $0.compactMap { $0.key == skipped ? nil : $0.value.channel } }
        guard !targets.isEmpty else { return }
        do {
            let payload = try message.encoded()
            for channel in targets { channel.writeAndFlush(ByteBuffer(bytes: payload), promise: nil) }
        } catch {
            logger.error("cannot encode a message for the attached processes: \(error)")
        }
    }

    /// Tells each client how far its writes are on disk: `applied` is what the host had applied
    /// when the save that just succeeded took its snapshot.
    func saved(_ applied: [ReplicaID: UInt64]) {
        reportDurable(applied, to: nil)
    }

    /// Sends `durable` to `only` (every client when nil) with what of its own origins `applied`
    /// covers, unless it was told that much already: one message per save that has something
    /// new for it, however many saves and synchronize answers there are.
    func reportDurable(_ applied: [ReplicaID: UInt64], to only: (any Channel)?) {
        let only = only.map(ObjectIdentifier.init)
        let reports = clients.withLock { clients -> [(any Channel, VersionVector)] in
            var reports: [(any Channel, VersionVector)] = []
            for (id, client) in clients where !client.origins.isEmpty && (only == nil || id == only) {
                let durable = VersionVector(applied.filter { client.origins.contains($0.key) && $0.value > client.durable[$0.key] })
                guard !durable.counters.isEmpty else { continue }
                clients[id]?.durable.formUnion(durable)
                reports.append((client.channel, durable))
            }
            return reports
        }
        for (channel, durable) in reports { Self.send(.durable(durable), on: channel, logger: logger) }
    }

    static func send(_ message: LocalMessage, on channel: any Channel, logger: Logger) {
        do {
            channel.writeAndFlush(ByteBuffer(bytes: try message.encoded()), promise: nil)
        } catch {
            logger.error("cannot encode a message for an attached process: \(error)")
            channel.close(promise: nil)
        }
    }

    /// Closes every client's connection; they reattach (and get a fresh snapshot).
    func closeClients() {
        let all = clients.withLock { c in defer { c = [:] }; return c.values.map(\.channel) }
        for channel in all { channel.close(promise: nil) }
    }

    /// Stops listening, removes the socket and closes every client (they take over or reattach).
    func stop() {
        guard stopped.withLock({ s in defer { s = true }; return !s }) else { return }
        unlink(path)
        server.close(promise: nil)
        let all = clients.withLock { c in defer { c = [:] }; return c.values.map(\.channel) }
        for channel in all { channel.close(promise: nil) }
    }
}

// MARK: What the store does for its attached processes

extension StoreHost {
    /// What the store had applied of each attached process's writes.
    var applied: [ReplicaID: UInt64] {
        backend?.state.withLock { $0.attachedApplied } ?? [:]
    }

    /// The snapshot a newly attached process gets: every current entry of `backend`, in parts
    /// that fit a frame. (This and ``apply(_:undecodable:to:)`` take the store, not the
    /// socket: what the host does to the store is tested without one.)
    static func snapshot(of backend: StoreBackend, reason: ChangeReason?) -> [LocalMessage] {
        let (entries, account, device) = backend.state.withLock { s in
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
    /// own: one that breaks a quota is refused, the others apply. (``StoreLimits``' per-entry
    /// rules were applied as the message was read, ``LocalMessage/decode(_:)``: what breaks them
    /// arrives in `undecodable`.) An entry at or below what was applied of its origin is one
    /// sent again after a reattach: already here, skipped. Returns what was applied per origin,
    /// the refusals, and the entries whose visible value changed, for the other attached
    /// processes; this process's observers are told here (`serverChange`).
    ///
    /// Under the store's lock, as a write of the store's own: what was applied of each origin
    /// is recorded in the same step, so that a save's snapshot of it (``StoreBackend/flush()``)
    /// never claims a write its snapshot of the replica lacks.
    static func apply(_ entries: [Entry], undecodable: [RefusedEntry], to backend: StoreBackend)
        -> (applied: VersionVector, refused: [LocalMessage.Refusal], changed: [Entry]) {
        var refused = undecodable.compactMap { entry -> LocalMessage.Refusal? in
            guard let origin = entry.origin, let sequence = entry.sequence else { return nil }
            return LocalMessage.Refusal(origin: origin, sequence: sequence, key: entry.key?.string ?? "",
                                        code: entry.reason.rawValue, reason: entry.detail)
        }
        let wall = backend.wallMilliseconds()
        let (changed, schedule, handler, applied) = backend.state.withLock { s -> ([Entry], Bool, (@Sendable () -> Void)?, VersionVector) in
            var changed: [StoreKey] = []
            var applied = VersionVector()
            var touched = false
            let strict = backend.isStrict(s)
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
            // Taken here, in the same step: the entries as the store now holds them.
            return (changed.compactMap { s.replica.entries[$0] }, backend.scheduleSave(&s), s.localChangeHandler, applied)
        }
        if schedule { backend.scheduleWriteBehind() }
        handler?()
        if !changed.isEmpty { backend.postHere(ChangeEvent(reason: .serverChange, keys: changed.map(\.key.string))) }
        return (applied, refused, changed)
    }

    /// A `write` message of the client on `channel`: applied (``apply(_:undecodable:to:)``), its
    /// changes sent to the other clients as `serverChange`, and the refusals returned for the
    /// writer, which is told nothing else now: not that the host applied them (it has them in
    /// its copy already, and nothing it does waits for that) nor its own change back; a later
    /// `durable` tells it they are on disk.
    func receive(_ entries: [Entry], undecodable: [RefusedEntry], from channel: any Channel) -> [LocalMessage.Refusal] {
        guard let backend else { return [] }
        let outcome = Self.apply(entries, undecodable: undecodable, to: backend)
        noteOrigins(outcome.applied.counters.keys, of: channel)
        if !outcome.changed.isEmpty {
            for part in Self.parts(outcome.changed) { broadcast(.change(.serverChange, part), except: channel) }
        }
        return outcome.refused
    }

    /// Sends the entries behind an external change to the attached processes, which post it too:
    /// `entries` when the caller took them with the change, else the store's current ones.
    /// Quota violations stay with the process whose write was refused; an account switch
    /// reconnects them instead (``closeClients()``).
    func forward(_ event: ChangeEvent, entries given: [Entry]? = nil) {
        guard event.reason == .serverChange || event.reason == .initialSyncChange, let backend else { return }
        let entries = given ?? backend.state.withLock { s in event.keys.compactMap { s.replica.entries[StoreKey($0)] } }
        guard !entries.isEmpty else { return }
        for part in Self.parts(entries) { broadcast(.change(event.reason, part)) }
    }
}
