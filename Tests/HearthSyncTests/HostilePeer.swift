import Foundation
import Logging
import HearthCore
import HearthIdentity
import HearthSync
import HearthTesting
import HearthTransport
import NIOCore
import Testing

/// A device of the household gone bad: a real member of the account (its own certificate,
/// signed by the account CA, and its own key) that speaks the documented frames and messages
/// by hand, to say whatever it likes.
struct HostilePeer: Sendable {
    let identity: DeviceIdentity
    let storeIdentifier: String
    /// Where it dials: the in-memory network of the devices under test, or TLS on 127.0.0.1 (nil).
    var network: InMemoryNetwork?

    /// A member with an identity made by the test (e.g. with the account's authority).
    init(identity: DeviceIdentity, storeIdentifier: String, network: InMemoryNetwork? = nil) {
        self.identity = identity
        self.storeIdentifier = storeIdentifier
        self.network = network
    }

    /// Joins the account of the device whose account directory is `accountDirectory`, as a
    /// user handed the join bundle would (the account passphrase of the test households is "p").
    init(joining accountDirectory: String, root: String, storeIdentifier: String, passphrase: String = "p",
         name: String = "rogue") throws {
        let owner = AccountStore(directory: URL(fileURLWithPath: accountDirectory), logger: Logger(label: "test"), scrypt: .testing)
        let account = try #require(try owner.currentAccountID())
        let bundle = try owner.exportJoinBundle(account)
        identity = try AccountStore(directory: URL(fileURLWithPath: "\(root)/\(name)-\(UUID())"), logger: Logger(label: "test"), scrypt: .testing)
            .importJoinBundle(bundle, passphrase: passphrase, deviceName: name)
        self.storeIdentifier = storeIdentifier
    }

    /// Joins the throwaway account of `cluster`, for its store (its files kept in the cluster's
    /// folder, removed with it).
    init(joining cluster: LoopbackCluster, name: String = "rogue") throws {
        try self.init(joining: cluster.accountDirectory(for: 0), root: cluster.rootDirectory, storeIdentifier: cluster.storeIdentifier,
                      passphrase: cluster.accountPassphrase, name: name)
        network = cluster.network
    }

    /// Connects over mutual TLS (or ``network``) to the device listening on `port` (nothing is sent yet). With
    /// `reading: false` nothing it sends is ever read: a peer that lets the honest end's
    /// writes pile up.
    func connect(port: Int, reading: Bool = true) async throws -> HostileLink {
        if let network {
            let endpoint = try network.maker(PeerNetworkSetup(identity: identity, removals: nil, removalNotice: nil, logger: Logger(label: "test")))
            return HostileLink(try await endpoint.dial(host: "memory", port: port, expecting: nil), reading: reading)
        }
        return HostileLink(try await PeerTransport(identity: identity, logger: Logger(label: "test")).connect(host: "127.0.0.1", port: port), reading: reading)
    }

    /// A hello listing `stores` (by default this peer's store) with the digest of `vector`; the
    /// vector itself goes in a `store` message (see ``greeting(vector:)``).
    func hello(vector: VersionVector = VersionVector(), protocolVersion: Int = SyncMessage.protocolVersion,
               stores: [String]? = nil) throws -> SyncMessage {
        let listed = (stores ?? [storeIdentifier]).map {
            SyncMessage.Hello.Store(identifier: $0, vectorDigest: SyncMessage.vectorDigest(vector),
                                    peersDigest: SyncMessage.peersDigest([identity.deviceID.data]))
        }
        return .hello(SyncMessage.Hello(protocolVersion: protocolVersion, account: Data(identity.account.id.bytes), stores: listed))
    }

    /// What an honest device opens a connection with: the hello, then its vector of the store
    /// (so the honest end sends what it lacks whatever the digests say).
    func greeting(vector: VersionVector = VersionVector()) throws -> [SyncMessage] {
        [try hello(vector: vector), .store(.init(store: storeIdentifier, vector: vector))]
    }

    /// A new origin of this device (bound to it, as every honest replica's is).
    func origin() -> ReplicaID { ReplicaID.random(boundTo: identity.deviceID.data) }

    /// An entry written and correctly signed by this device.
    func entry(_ key: StoreKey, _ value: PropertyListValue?, origin: ReplicaID, sequence: UInt64,
               at milliseconds: UInt64 = HybridLogicalClock.wallMilliseconds(), store: String? = nil) throws -> Entry {
        try identity.signed(Entry(key: key, value: value, timestamp: HLCTimestamp(milliseconds: milliseconds, counter: 0),
                                  origin: origin, sequence: sequence), storeIdentifier: store ?? storeIdentifier)
    }

    /// A delta carrying `entries` and this device's certificate.
    func delta(_ entries: [Entry], vector: VersionVector = VersionVector(), store: String? = nil) -> SyncMessage {
        .delta(.init(store: store ?? storeIdentifier, entries: entries, certificates: [Data(identity.certificate.derEncoded)], vector: vector))
    }
}

/// One connection of a ``HostilePeer``: frames out as the test says, and what the honest end
/// answers, kept for the test to read.
final class HostileLink: Sendable {
    private let outgoing: AsyncStream<[UInt8]>.Continuation
    private let received = Locked<(messages: [SyncMessage], next: Int, closed: Bool)>(([], 0, false))
    /// Frames handed to ``send(raw:)`` and not written to the socket yet (the honest end reads
    /// no faster than it likes): a flood keeps this bounded rather than its own memory growing.
    private let unwritten = Locked(0)
    private let task: Task<Void, Never>
    /// Signalled at each message received, each frame written and when the link closes: what
    /// ``next(within:where:)``, ``waitUntilClosed(within:)`` and ``waitForRoom(below:until:)``
    /// wait on (no polling).
    private let arrivals = ChangeSignal()

    convenience init(_ link: any PeerLink, reading: Bool = true) {
        self.init(opened: link, reading: reading)
    }

    init<Link: PeerLink>(opened connection: Link, reading: Bool) {
        let (stream, outgoing) = AsyncStream<[UInt8]>.makeStream()
        self.outgoing = outgoing
        let received = self.received
        let unwritten = self.unwritten
        let sender = connection.peer.deviceID.data
        let arrivals = arrivals
        task = Task {
            _ = try? await connection.executeThenClose { inbound, outbound in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await payload in stream {
                            try await outbound.writeFrames([ByteBuffer(bytes: payload)])
                            unwritten.withLock { $0 -= 1 }
                            arrivals.signal()
                        }
                    }
                    group.addTask {
                        // Not reading: wait, without a timer, until the link ends (task cancelled).
                        guard reading else {
                            let (never, keep) = AsyncStream<Void>.makeStream()
                            for await _ in never {}
                            keep.finish()
                            return
                        }
                        for try await frame in inbound {
                            guard let message = try? SyncMessage(decoding: Data(frame.readableBytesView), sender: sender) else { continue }
                            // Answer heartbeats, as any peer does, so the link is not dropped as dead.
                            if case .ping = message, let pong = try? SyncMessage.pong([:]).encoded() {
                                unwritten.withLock { $0 += 1 }
                                outgoing.yield(Array(pong))
                            }
                            received.withLock { $0.messages.append(message) }
                            arrivals.signal()
                        }
                    }
                    // The first to end (the honest end closed, or close() was called) ends both.
                    _ = try await group.next()
                    group.cancelAll()
                }
            }
            received.withLock { $0.closed = true }
            arrivals.signal()
        }
    }

    func send(_ message: SyncMessage) throws { send(raw: Array(try message.encoded())) }

    func send(_ messages: [SyncMessage]) throws { for message in messages { try send(message) } }

    /// Sends a payload as one frame, whatever it holds.
    func send(raw payload: [UInt8]) {
        unwritten.withLock { $0 += 1 }
        outgoing.yield(payload)
    }

    /// Frames sent and not yet written to the socket.
    var queued: Int { unwritten.withLock { $0 } }

    /// Waits until fewer than `limit` frames wait to be written (the honest end read some), or
    /// the link closed; false if neither by `deadline`.
    func waitForRoom(below limit: Int, until deadline: ContinuousClock.Instant) async -> Bool {
        await ChangeSignal.waitUntil(deadline, observing: { [arrivals] }) { queued < limit || isClosed }
    }

    /// The next message received that `matches`, skipping others; `nil` after `timeout`.
    func next(within timeout: Duration = .seconds(20), where matches: (SyncMessage) -> Bool = { _ in true }) async -> SyncMessage? {
        var found: SyncMessage?
        // On RunTime: a stall of this process (both ends of an in-memory link live in it) is
        // not the honest end's silence.
        _ = await RunTime.wait(for: timeout, observing: { [arrivals] }) {
            found = received.withLock { r -> SyncMessage? in
                while r.next < r.messages.count {
                    defer { r.next += 1 }
                    if matches(r.messages[r.next]) { return r.messages[r.next] }
                }
                return nil
            }
            return found != nil
        }
        return found
    }

    /// The next `refused` message.
    func nextRefusal(within timeout: Duration = .seconds(20)) async -> SyncMessage.Refusal? {
        guard case .refused(let refusal)? = await next(within: timeout, where: { if case .refused = $0 { true } else { false } }) else {
            return nil
        }
        return refusal
    }

    /// Whether the honest end is still there: a ping is answered with a pong.
    func isAnswering(within timeout: Duration = .seconds(20)) async throws -> Bool {
        try send(.ping([:]))
        return await next(within: timeout, where: { if case .pong = $0 { true } else { false } }) != nil
    }

    /// The honest end's vector of `store`, from the next `store` message about it.
    func nextVector(of store: String, within timeout: Duration = .seconds(20)) async -> VersionVector? {
        guard case .store(let state)? = await next(within: timeout, where: {
            if case .store(let state) = $0, state.store == store, state.vector != nil { true } else { false }
        }) else { return nil }
        return state.vector
    }

    var isClosed: Bool { received.withLock { $0.closed } }

    /// Every message received so far.
    var all: [SyncMessage] { received.withLock { $0.messages } }

    /// Waits until the honest end closes the connection; false if it has not after `timeout`.
    func waitUntilClosed(within timeout: Duration = .seconds(20)) async -> Bool {
        await RunTime.wait(for: timeout, observing: { [arrivals] }) { isClosed }
    }

    func close() async {
        outgoing.finish()
        await task.value
    }

    /// Closes at once, dropping what the honest end has not read yet (a flood's backlog).
    func abort() async {
        outgoing.finish()
        task.cancel()
        await task.value
    }
}

/// A binary property list written object by object, as no honest writer would: shared objects,
/// references and counts exactly as the test says.
struct RawPropertyList {
    enum Object {
        case string(String), data(count: Int), bytes([UInt8]), integer(Int64), bool(Bool)
        case array([Int]), dictionary([(key: Int, value: Int)])
    }

    var objects: [Object] = []

    /// Adds an object; returns its index.
    @discardableResult
    mutating func add(_ object: Object) -> Int {
        objects.append(object)
        return objects.count - 1
    }

    /// The document, object 0 the root.
    func bytes() -> [UInt8] {
        let refSize = objects.count <= 0xFF ? 1 : objects.count <= 0xFFFF ? 2 : 4
        var out = Array("bplist00".utf8)
        var offsets: [Int] = []
        func uint(_ value: Int, _ width: Int) { for shift in stride(from: (width - 1) * 8, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: value >> shift)) } }
        func marker(_ type: UInt8, _ count: Int) {
            if count < 15 { out.append(type | UInt8(count)); return }
            out.append(type | 0x0F)
            out.append(0x13)
            uint(count, 8)
        }
        for object in objects {
            offsets.append(out.count)
            switch object {
            case .string(let text): marker(0x50, text.utf8.count); out += Array(text.utf8)
            case .data(let count): marker(0x40, count); out += [UInt8](repeating: 0xAB, count: count)
            case .bytes(let bytes): marker(0x40, bytes.count); out += bytes
            case .integer(let value): out.append(0x13); uint(Int(value), 8)
            case .bool(let value): out.append(value ? 0x09 : 0x08)
            case .array(let refs): marker(0xA0, refs.count); for ref in refs { uint(ref, refSize) }
            case .dictionary(let pairs):
                marker(0xD0, pairs.count)
                for pair in pairs { uint(pair.key, refSize) }
                for pair in pairs { uint(pair.value, refSize) }
            }
        }
        let table = out.count
        for offset in offsets { uint(offset, 8) }
        out += [0, 0, 0, 0, 0, 0, 8, UInt8(refSize)]
        uint(objects.count, 8)
        uint(0, 8)
        uint(table, 8)
        return out
    }
}
