import Foundation
@testable import Hearth
import HearthCore
import Logging
import NIOCore
import NIOEmbedded
import Testing

/// What a write through the host sends, and to whom (issue 27, point 6): the writer gets no
/// `acknowledged` and no `change` of its own write (Apple's store tells no process of its own
/// writes, and the writer's copy has them), only a refusal if one is refused, and one `durable`
/// per save that has something new for it; every other attached process gets the change as
/// `serverChange`, and so do the host's own observers. In memory: the clients are
/// `EmbeddedChannel`s, the host's and the client's state driven by the test; the socket's side is
/// LocalAttachTests'.
@Suite("A write through the host: what goes back")
struct AttachWritePathTests {
    let logger = Logger(label: "test")
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-writepath-\(UUID().uuidString)").path

    /// A host's store with its file (saves are real, and only when the test asks: the write-behind
    /// is an hour away) and a ``StoreHost`` with no socket.
    func hostedStore() throws -> (StoreBackend, StoreHost) {
        let location = StoreLocation(dataDirectory: directory, storeIdentifier: "s", account: nil)
        let (storage, replica) = try ReplicaStorage.open(location, on: SystemDisk(), device: nil, logger: logger,
                                                         wall: { HybridLogicalClock.wallMilliseconds() }, random: { UInt64.random(in: .min ... .max) })
        let backend = StoreBackend(storeIdentifier: "s", storage: storage, replica: replica, logger: logger,
                                   writeBehindDelay: .seconds(3600),
                                   wall: { HybridLogicalClock.wallMilliseconds() }, dataDirectory: directory)
        let host = StoreHost(path: "\(directory)/none.sock", server: EmbeddedChannel(), backend: backend)
        backend.state.withLock { $0.localHost = host }
        return (backend, host)
    }

    func client(_ host: StoreHost, pid: Int32) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        #expect(host.register(channel, pid: pid))
        return channel
    }

    /// Every message the host sent on `channel` since the last call.
    func sent(_ channel: EmbeddedChannel) throws -> [LocalMessage] {
        var messages: [LocalMessage] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            messages.append(try LocalMessage.decode(Data(buffer.readableBytesView)).message)
        }
        return messages
    }

    func entry(_ key: String, _ value: Int64, origin: ReplicaID, sequence: UInt64) -> Entry {
        Entry(key: StoreKey(key), value: .integer(value),
              timestamp: HLCTimestamp(milliseconds: HybridLogicalClock.wallMilliseconds(), counter: UInt16(sequence)),
              origin: origin, sequence: sequence)
    }

    @Test("The writer gets back no ack and no echo, only refusals and one durable per save with news for it; the others get serverChange")
    func writerGetsOnlyWhatItNeeds() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (backend, host) = try hostedStore()
        defer { host.stop() }
        let events = backend.makeStream()
        let a = try client(host, pid: 1), b = try client(host, pid: 2)
        let originA = ReplicaID.random(), originB = ReplicaID.random()

        // A writes two keys: nothing comes back to A; B gets both as serverChange.
        let refused = host.receive([entry("x", 1, origin: originA, sequence: 1), entry("y", 2, origin: originA, sequence: 2)],
                                   undecodable: [], from: a)
        #expect(refused.isEmpty)
        #expect(try sent(a) == [], "the writer was sent its own write back, or an acknowledgement")
        let toB = try sent(b)
        #expect(toB.count == 1)
        if case .change(let reason, let entries)? = toB.first {
            #expect(reason == .serverChange && entries.map(\.key) == ["x", "y"] && entries.allSatisfy { $0.origin == originA })
        } else {
            Issue.record("B was not sent A's change: \(toB)")
        }

        // One entry refused where it was read: the writer gets that refusal (returned to its
        // handler, which sends it) and nothing else; B hears nothing.
        let bad = RefusedEntry(key: StoreKey("w"), origin: originA, sequence: 3, reason: .keyTooLong, detail: "too long")
        #expect(host.receive([], undecodable: [bad], from: a).map(\.sequence) == [3])
        #expect(try sent(a) == [] && sent(b) == [])

        // The save: A is told its writes are on disk, once; B, which wrote nothing, nothing.
        #expect(backend.flush())
        #expect(try sent(a) == [.durable(VersionVector([originA: 2]))])
        #expect(try sent(b) == [])
        // A synchronize answer with nothing new for A (the save above told it) repeats nothing.
        host.reportDurable(host.applied, to: a)
        #expect(try sent(a) == [])

        // B writes: A gets it; the next save tells B, and does not tell A again what it knows.
        #expect(host.receive([entry("z", 3, origin: originB, sequence: 1)], undecodable: [], from: b).isEmpty)
        #expect(try sent(b) == [])
        #expect(try sent(a).count == 1)
        #expect(backend.flush())
        #expect(try sent(b) == [.durable(VersionVector([originB: 1]))])
        #expect(try sent(a) == [], "a save with nothing new for A sent it a durable again")

        // The host's own observers hear of both attached processes' writes, as serverChange.
        var heard: [ChangeEvent] = []
        for await event in events {
            heard.append(event)
            if heard.count == 2 { break }
        }
        #expect(heard.map(\.reason) == [.serverChange, .serverChange])
        #expect(heard.map(\.keys) == [["x", "y"], ["z"]])
    }

    @Test("Without the echo, a write the host reported durable stays in the attached copy when the copy is rebuilt")
    func durableWritesJoinTheConfirmedCopy() throws {
        let backend = StoreBackend(storeIdentifier: "s", storage: nil, replica: Replica(), logger: logger, writeBehindDelay: .seconds(3600),
                                   wall: { HybridLogicalClock.wallMilliseconds() })
        let client = LocalClient(socketPath: "\(directory)/none.sock", configuration: .init(dataDirectory: directory),
                                 group: EmbeddedEventLoop())   // never connects: the channel below stands in
        let attached = AttachedStore(backend: backend, client: client)
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        var attachment = Attachment(store: attached, location: StoreLocation(dataDirectory: directory, storeIdentifier: "s", account: nil))
        attachment.channel = channel
        attachment.attached = true
        attachment.everAttached = true
        backend.state.withLock { $0.attachment = attachment }
        // Let go before the store's deinit, which would otherwise put the last writes out on a
        // loop nobody runs any more.
        defer { backend.state.withLock { $0.attachment = nil } }

        /// The writes the copy sent to the host since the last call.
        func written() throws -> [Entry] {
            // The flush of a write soon after another waits for its batch (250 µs).
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
            var entries: [Entry] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
                if case .write(let batch) = try LocalMessage.decode(Data(buffer.readableBytesView)).message { entries += batch }
            }
            return entries
        }

        try backend.write(.integer(1), forKey: "a")
        let first = try #require(try written().first)
        #expect(first.key == "a")
        // The host saved it (and, as it no longer echoes a writer's change, sent nothing else).
        attached.hostDurable(VersionVector([first.origin: first.sequence]))
        #expect(backend.state.withLock { $0.attachment?.pending.isEmpty } == true)

        // A later write the host refuses: the copy is rebuilt from the host's entries and what is
        // pending; `a`, durable and no longer pending, must be among the host's entries.
        try backend.write(.integer(2), forKey: "b")
        let second = try #require(try written().first)
        attached.hostRefused(LocalMessage.Refusal(origin: second.origin, sequence: second.sequence, key: "b",
                                                  code: KeyValueStoreError.Code.storeFull.rawValue, reason: "full"), channel: channel)
        #expect(backend.value(forKey: "b") == nil, "the refused write is still in the copy")
        #expect(backend.value(forKey: "a") == .integer(1), "the durable write left the copy when it was rebuilt")

        // Another process's change still enters the copy (in place) and survives a rebuild too.
        let other = entry("c", 3, origin: .random(), sequence: 1)
        attached.applyHostChange([other], reason: .serverChange, channel: channel)
        attached.hostRefused(LocalMessage.Refusal(origin: second.origin, sequence: second.sequence, key: "b",
                                                  code: KeyValueStoreError.Code.storeFull.rawValue, reason: "full"), channel: channel)
        #expect(backend.value(forKey: "c") == .integer(3) && backend.value(forKey: "a") == .integer(1))
    }

    @Test("An instance that stopped posting notifications (the daemon's) gets none; another instance of the store still does")
    func daemonInstancePostsNothing() throws {
        let backend = StoreBackend(storeIdentifier: "s", storage: nil, replica: Replica(), logger: logger, writeBehindDelay: .seconds(3600),
                                   wall: { HybridLogicalClock.wallMilliseconds() })
        let daemonStore = UbiquitousKeyValueStore(storeIdentifier: "s", backend: backend)
        let appStore = UbiquitousKeyValueStore(storeIdentifier: "s", backend: backend)
        daemonStore.internals.stopPostingNotifications()
        let posted = Locked<[String]>([])
        let arrived = DispatchSemaphore(value: 0)
        let tokens = [("daemon", daemonStore), ("app", appStore)].map { name, store in
            NotificationCenter.default.addObserver(forName: UbiquitousKeyValueStore.didChangeExternallyNotification, object: store, queue: nil) { _ in
                posted.withLock { $0.append(name) }
                if name == "app" { arrived.signal() }
            }
        }
        defer { for token in tokens { NotificationCenter.default.removeObserver(token) } }
        backend.applyExternal([entry("k", 1, origin: .random(), sequence: 1)], coveredBy: nil, reason: .serverChange)
        // Both instances are posted for in one delivery: once the app's has come, the daemon's would have.
        #expect(arrived.wait(timeout: .now() + 10) == .success)
        #expect(posted.withLock { $0 } == ["app"])
    }
}
