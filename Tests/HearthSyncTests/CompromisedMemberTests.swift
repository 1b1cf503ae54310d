import Foundation
import Hearth
import HearthCore
import HearthSync
import HearthTesting
import Testing

/// ``Household`` on the in-memory network: the victim (replica 0) and the legitimate device
/// (replica 1) are stores of a ``LoopbackCluster`` (the product's store, its admission policy
/// and its engine; frames encoded, entries signed and verified), and the compromised member a
/// ``HostilePeer`` dialling that network. What the attacks below test is protocol logic (what
/// the victim refuses, keeps, closes and goes on syncing), so no process, socket or timer is
/// needed; the attacks whose point is a process's memory or CPU stay in
/// ``CompromisedDeviceTests`` against a live victim.
final class MemoryHousehold: Sendable {
    let cluster: LoopbackCluster
    let hostile: HostilePeer
    /// The legitimate device's last write of "legit-counter".
    private let counter = Locked<Int64>(0)

    init(_ cluster: LoopbackCluster) async throws {
        self.cluster = cluster
        hostile = try HostilePeer(joining: cluster)
        try await cluster.waitUntilConnected()
        // As the live household starts: the victim holds the legitimate device's writes.
        #expect(try await legitStillSyncs())
    }

    /// Runs `body` with a household of its own, shut down after.
    static func with(_ body: (MemoryHousehold) async throws -> Void) async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, storeIdentifier: Household.store,
                                      linkTimeout: UnderLoad.linkTimeout, connectTimeout: UnderLoad.connectTimeout) { cluster in
            try await body(try await MemoryHousehold(cluster))
        }
    }

    var victim: UbiquitousKeyValueStore { cluster[0] }
    var legit: UbiquitousKeyValueStore { cluster[1] }
    var victimPort: Int { cluster.ports[0] }
    var legitCounterAtVictim: Int64 { victim.longLong(forKey: "legit-counter") }

    /// Whether the victim gets the legitimate device's next writes (three, as the live
    /// household's check waits for): each written, then waited for at the victim, on events.
    func legitStillSyncs() async throws -> Bool {
        for _ in 0..<3 {
            let next = counter.withLock { $0 += 1; return $0 }
            legit.set(next, forKey: "legit-counter")
            do {
                try await cluster.until("the victim to hold the legitimate device's write \(next)") { legitCounterAtVictim == next }
            } catch {
                Issue.record(error)
                return false
            }
        }
        return true
    }

    /// An origin of the legitimate device as the victim's vector shows it.
    func legitOrigin() async throws -> ReplicaID {
        let link = try await hostile.connect(port: victimPort)
        defer { Task { await link.close() } }
        try link.send(try hostile.greeting())
        let vector = try #require(await link.nextVector(of: hostile.storeIdentifier), "no vector from the victim")
        let legitDevice = cluster.deviceID(of: 1)
        return try #require(vector.counters.keys.first { $0.isBound(to: legitDevice.data) })
    }

    /// The victim's vector as a new connection's `store` message shows it.
    func victimVector() async throws -> VersionVector {
        let probe = try await hostile.connect(port: victimPort)
        try probe.send(try hostile.greeting())
        let vector = await probe.nextVector(of: hostile.storeIdentifier)
        await probe.close()
        return try #require(vector, "no vector from the victim")
    }
}

/// Issue 12 and 26: what one compromised member can do to the protocol of the others, on the
/// in-memory network (the live-process attacks are ``CompromisedDeviceTests``).
@Suite("A compromised member cannot make the others lose writes, grow their vectors or exceed its share (in memory)")
struct CompromisedMemberTests {
    @Test("Point 2: a delta whose vector claims another device's writes does not stop them reaching the victim")
    func vectorClaims() async throws {
        try await MemoryHousehold.with { household in
            let origin = try await household.legitOrigin()
            let link = try await household.hostile.connect(port: household.victimPort)
            try link.send(try household.hostile.greeting())
            // No entries, no signature needed: only a claim that the victim has seen 2^62 of them.
            try link.send(.delta(.init(store: household.hostile.storeIdentifier, entries: [], certificates: [], vector: VersionVector([origin: 1 << 62]))))
            // And an entry of the hostile device's own, signed, under the legitimate device's origin.
            let squatted = try household.hostile.entry("squat", "x", origin: origin, sequence: 1 << 62)
            try link.send(household.hostile.delta([squatted]))
            let refusal = try #require(await link.nextRefusal())
            #expect(refusal.entries.map(\.reason) == [.originMismatch])
            await link.close()
            // The legitimate device reconnects (new hellos both ways) and its writes still arrive.
            try await household.cluster.restart(1)
            #expect(try await household.legitStillSyncs())
            #expect(household.victim.object(forKey: "squat") == nil)
        }
    }

    @Test("Point 3: made-up origins do not grow the victim's vector; legitimate devices still connect")
    func madeUpOrigins() async throws {
        try await MemoryHousehold.with { household in
            let link = try await household.hostile.connect(port: household.victimPort)
            try link.send(try household.hostile.greeting())
            // A vector of 70,000 origins is refused outright (the link closes) …
            var claims: [ReplicaID: UInt64] = [:]
            for _ in 0..<70_000 { claims[ReplicaID.random()] = 1 }
            try link.send(.delta(.init(store: household.hostile.storeIdentifier, entries: [], certificates: [], vector: VersionVector(claims))))
            #expect(await link.waitUntilClosed())
            await link.close()
            // … and 6,000 signed entries of one key, each under an origin of its own, leave one.
            let second = try await household.hostile.connect(port: household.victimPort)
            try second.send(try household.hostile.greeting())
            let base = HybridLogicalClock.wallMilliseconds()
            var entries: [Entry] = []
            for i in 0..<6000 { entries.append(try household.hostile.entry("churn", .integer(Int64(i)), origin: household.hostile.origin(), sequence: 1, at: base + UInt64(i) / 16)) }
            try second.send(household.hostile.delta(entries))
            try await household.cluster.until("the churn to land", deadline: .seconds(60)) { household.victim.object(forKey: "churn") != nil }
            await second.close()
            // A new connection shows what the victim's vector holds now: a few origins.
            let vector = try await household.victimVector()
            #expect(vector.counters.count < 10, "\(vector.counters.count) origins")
            #expect(try await household.legitStillSyncs())
        }
    }

    @Test("Point 4: one device cannot flood a store past its share: 120 values of 1 MB leave about 2 MB")
    func flood() async throws {
        try await MemoryHousehold.with { household in
            let link = try await household.hostile.connect(port: household.victimPort)
            try link.send(try household.hostile.greeting())
            let origin = household.hostile.origin()
            let blob = PropertyListValue.data(Data(repeating: 7, count: 1_000_000))
            var refused = 0
            for i in 0..<120 {
                try link.send(household.hostile.delta([try household.hostile.entry(StoreKey("flood-\(i)"), blob, origin: origin, sequence: UInt64(i + 1))]))
            }
            while let refusal = await link.nextRefusal(within: .seconds(30)) {
                refused += refusal.entries.filter { $0.reason == .signerQuota }.count
                if refused >= 118 { break }
            }
            #expect(refused >= 118)
            #expect(try await household.legitStillSyncs())
            await link.close()
            // What the victim keeps, as its file on disk holds it once saved.
            #expect(household.victim.synchronize())
            let directory = household.cluster.configuration(for: 0).dataDirectory
            let files = (FileManager.default.subpaths(atPath: directory) ?? []).filter { $0.hasSuffix(".plist") }
            #expect(!files.isEmpty, "no store file in \(directory)")
            let bytes = files.compactMap { try? FileManager.default.attributesOfItem(atPath: "\(directory)/\($0)")[.size] as? Int }.reduce(0, +)
            #expect(bytes < 3_000_000, "store file \(bytes) bytes")
        }
    }

    @Test("Point 7 (protocol 3): a hello listing more than 1,024 stores closes the link; the victim syncs on")
    func overlongStoreList() async throws {
        try await MemoryHousehold.with { household in
            let link = try await household.hostile.connect(port: household.victimPort)
            let stores = [Household.store] + (0..<SyncMessage.maximumStores).map { "com.example.made-up-\($0)" }
            let hello = try household.hostile.hello(stores: stores)
            #expect(try hello.encoded().count < SyncMessage.maximumHelloSize)
            try link.send(hello)
            #expect(await link.waitUntilClosed())
            #expect(!link.all.contains { if case .store = $0 { true } else { false } })
            await link.close()
            #expect(try await household.legitStillSyncs())
        }
    }

    @Test("Point 8 (protocol 3): deltas, acks and refusals naming a store the victim does not serve are ignored; the link and the store go on")
    func unknownStore() async throws {
        try await MemoryHousehold.with { household in
            let link = try await household.hostile.connect(port: household.victimPort)
            try link.send(try household.hostile.greeting())
            let origin = household.hostile.origin()
            let other = "com.example.not-here"
            // Signed for the other store, and sent as its delta: nothing of it lands, nothing is refused.
            let stray = try household.hostile.entry("stray", "x", origin: origin, sequence: 1, store: other)
            try link.send(household.hostile.delta([stray], store: other))
            try link.send(.ack(.init(store: other, vector: VersionVector([origin: 1]))))
            try link.send(.refused(.init(store: other, entries: [], clock: 0)))
            #expect(try await link.isAnswering())
            // The store the two share still syncs on the same link.
            try link.send(household.hostile.delta([try household.hostile.entry("here", "y", origin: origin, sequence: 2)]))
            try await household.cluster.until("the entry of the shared store to land") { household.victim.object(forKey: "here") != nil }
            #expect(household.victim.object(forKey: "stray") == nil)
            #expect(link.all.compactMap { if case .refused(let r) = $0 { r } else { nil } }.isEmpty)
            #expect(!link.isClosed)
            await link.close()
            #expect(try await household.legitStillSyncs())
        }
    }

    @Test("Issue 26 point 5: 4,200 origins of a member, 2 deletes each, do not evict the legitimate device's origin from the victim's vector; its writes are confirmed during and after")
    func originFlood() async throws {
        try await MemoryHousehold.with { household in
            // The legitimate device's writes are confirmed: the victim acknowledges them.
            #expect(await household.legit.waitUntilSynced(timeout: .seconds(30)))
            let link = try await household.hostile.connect(port: household.victimPort)
            try link.send(try household.hostile.greeting())
            var flood: [Entry] = []
            for i in 0..<4200 {
                let origin = household.hostile.origin()
                for j in 0..<2 { flood.append(try household.hostile.entry(StoreKey("gone-\(i)-\(j)"), nil, origin: origin, sequence: UInt64(j + 1))) }
            }
            for start in stride(from: 0, to: flood.count, by: SyncMessage.maximumDeltaEntries) {
                try link.send(household.hostile.delta(Array(flood[start..<min(start + SyncMessage.maximumDeltaEntries, flood.count)])))
            }
            // Both deltas answered: the victim has applied them all.
            for _ in 0..<2 { _ = await link.next(within: .seconds(60)) { if case .ack = $0 { true } else { false } } }
            let vector = try await household.victimVector()
            // The member's origins stop at its bound; the rest of its entries were refused (signerQuota).
            let memberOrigins = vector.counters.keys.filter { $0.isBound(to: household.hostile.identity.deviceID.data) }.count
            #expect(memberOrigins <= Replica.maximumOriginsPerDevice, "\(memberOrigins) origins of the member")
            let refusedOrigins = link.all.reduce(0) { count, message in
                guard case .refused(let refusal) = message else { return count }
                return count + refusal.entries.filter { $0.reason == .signerQuota && $0.detail.contains("origins") }.count
            }
            #expect(refusedOrigins > 0, "no entry refused for its origin")
            let legitDevice = household.cluster.deviceID(of: 1)
            #expect(vector.counters.keys.contains { $0.isBound(to: legitDevice.data) }, "the legitimate device's origin was evicted")
            // Its writes are confirmed during (the member's link is up) …
            for _ in 0..<2 {
                #expect(try await household.legitStillSyncs())
                #expect(await household.legit.waitUntilSynced(timeout: .seconds(30)), "a write of the legitimate device not acknowledged while the member's link is up")
            }
            await link.close()
            // … and after.
            #expect(try await household.legitStillSyncs())
            #expect(await household.legit.waitUntilSynced(timeout: .seconds(30)), "a write of the legitimate device not acknowledged after")
        }
    }
}
