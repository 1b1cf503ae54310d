import Foundation
import Hearth
import HearthCore
import HearthIdentity
import HearthSync
import HearthTestSupport
import HearthTesting
import Logging
import Testing

/// Issue 11: an entry a peer cannot take is refused alone; the sender learns it; the link and
/// every other write go on; a device whose clock was ahead syncs again once it is right.
@Suite("Refused entries")
struct RefusalTests {
    @Test("Issue 26 point 4: a clockAhead refusal names its cause: the member that stamped the replaced value, the writer of a relayed entry, or this device's clock")
    func clockAheadWording() throws {
        let refuser = try #require(DeviceID(bytes: [UInt8](repeating: 0x11, count: 32)))
        let member = Data(repeating: 0x66, count: 32)
        let wall: UInt64 = 1_700_000_000_000
        let refused = RefusedEntry(key: "k", origin: ReplicaID(high: 0x2222_2222_0000_0000, low: 1), sequence: 3, reason: .clockAhead, detail: "stamped …")
        let imposed = SyncRefusal(device: refuser, entry: refused, peerClock: wall - 3000, localClock: wall,
                                  imposedLead: Replica.ImposedLead(sequence: 3, signer: member, origin: ReplicaID.random(boundTo: member), lead: 12 * 3_600_000 - 400))
        #expect(imposed.description.contains("the value it replaces was stamped 12.0 h ahead of this device's clock by device 66666666"), "\(imposed.description)")
        #expect(!imposed.description.contains("fix the clock"))
        let relayed = SyncRefusal(device: refuser, entry: refused, peerClock: wall - 3000, localClock: wall, relayed: true)
        #expect(relayed.description.contains("device 22222222 wrote it, and this device relayed it"), "\(relayed.description)")
        let own = SyncRefusal(device: refuser, entry: refused, peerClock: wall - 48 * 3_600_000, localClock: wall)
        #expect(own.description.contains("this device's clock is 48.0 h ahead of its clock"), "\(own.description)")
    }

    /// `[[…[1]…]]`, `depth` arrays deep.
    static func nested(_ depth: Int) -> PropertyListValue {
        var value: PropertyListValue = 1
        for _ in 0..<depth { value = .array([value]) }
        return value
    }

    @Test("Point 2: an entry nested too deep is refused alone; the rest of the delta and later writes apply; the link stays up")
    func tooDeepRefusedAlone() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 1, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let peer = try HostilePeer(joining: cluster)
            let link = try await peer.connect(port: cluster.ports[0])
            try link.send(try peer.greeting())
            let origin = peer.origin()
            // 260 deep: within what a frame may nest (the codec allows a few levels of envelope),
            // beyond what a value may. A device of an older build could hold such a value.
            let entries = [try peer.entry("before", "1", origin: origin, sequence: 1),
                           try peer.entry("deep", Self.nested(260), origin: origin, sequence: 2),
                           try peer.entry("after", "3", origin: origin, sequence: 3)]
            try link.send(peer.delta(entries))
            let refusal = try #require(await link.nextRefusal())
            #expect(refusal.entries.map(\.key) == ["deep"])
            #expect(refusal.entries.first?.reason == .tooDeep)
            #expect(refusal.entries.first?.origin == origin && refusal.entries.first?.sequence == 2)
            let store = cluster[0]
            #expect(store.string(forKey: "before") == "1" && store.string(forKey: "after") == "3")
            #expect(store.value(forKey: "deep") == nil)
            // The same connection carries the next write: no reconnection, no loop.
            try link.send(peer.delta([try peer.entry("later", "4", origin: origin, sequence: 4)]))
            try await cluster.until("the later write") { store.string(forKey: "later") == "4" }
            #expect(try await link.isAnswering())
            #expect(!link.isClosed)
            await link.close()
        }
    }

    @Test("Point 2: two devices, one holding an entry 300 deep planted in its file, still exchange every later write")
    func plantedEntryBetweenDevices() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, storeIdentifier: "com.example.planted") { cluster in
            try cluster.write("A", forKey: "a", on: 0)
            try await cluster.waitUntilConverged(expected: ["a": "A"])
            try await cluster.restart(0) { data in
                let file = "\(data)/\(cluster.accountID)/com.example.planted.plist"
                let planted = try await PlantedEntry.plantDeep(300, into: file)
                #expect(planted.status == 0, "\(planted.error)")
            }
            try cluster.write("B", forKey: "b", on: 0)
            try cluster.write("C", forKey: "c", on: 1)
            try await cluster.waitUntilConverged(expected: ["a": "A", "b": "B", "c": "C"])
            #expect(await cluster[0].waitUntilSynced(timeout: .seconds(10)))
            #expect(await cluster[1].waitUntilSynced(timeout: .seconds(10)))
        }
    }

    @Test("Point 4: keys that differ only in Unicode normalisation stay two keys across sync")
    func exactKeysOverTheWire() async throws {
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, storeIdentifier: "com.example.keys") { cluster in
            try cluster.write("composed", forKey: composed, on: 0)
            try cluster.write("decomposed", forKey: decomposed, on: 0)
            try await cluster.until("both keys on replica 1") { cluster[1].keys.count == 2 }
            #expect(cluster[1].string(forKey: composed) == "composed")
            #expect(cluster[1].string(forKey: decomposed) == "decomposed")
            let change = try await cluster.nextNotification(on: 1, reason: .serverChange)
            #expect(Set(change.keys.map { Array($0.utf8) }).isSubset(of: [Array(composed.utf8), Array(decomposed.utf8)]))
        }
    }

    @Test("Point 13: a device 2 days ahead is refused entry by entry and told; once its clock is right its writes sync again")
    func clockAheadThenFixed() async throws {
        let capture = LogCapture()
        // Heartbeats of a second (links dead after 5 s of silence on the engines' RunTime, which
        // does not count a stall of this process, the two ends' own): a loaded machine does not
        // drop links, so a reconnection below can only be a refusal loop.
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, storeIdentifier: "com.example.clock", heartbeat: .seconds(1),
                                      clockSkews: [.seconds(2 * 86_400), .zero], logger: capture.logger("hearth")) { cluster in
            let ahead = cluster.deviceIDs[0], honest = cluster.deviceIDs[1]
            try cluster.write("from the future", forKey: "early", on: 0)
            // The writer hears of the refusal, with the clocks, at warning; the receiver says so too.
            try await cluster.until("the refusal") { cluster[0].syncRefusals.contains { $0.entry.key == "early" } }
            let refusal = try #require(cluster[0].syncRefusals.first)
            #expect(refusal.entry.reason == .clockAhead)
            #expect(refusal.device == honest)
            #expect(refusal.clockOffset > 47 * 3_600_000 && refusal.clockOffset < 49 * 3_600_000)
            // The warning follows the recorded refusal at once, but a test thread on a loaded machine
            // can look in between.
            try await cluster.until("the writer's warning") {
                capture.all.contains { $0.level == .warning && $0.message.contains("the peer refused 1 entry") }
            }
            let told = capture.all.filter { $0.level == .warning && $0.message.contains("the peer refused 1 entry") }
            #expect(told.count == 1 && told.first?.metadata["device"] == String(ahead.prefix(8)))   // once, however many connections
            #expect(capture.all.contains { $0.level == .warning && $0.message.contains("refused 1 of 1 entries") && $0.metadata["device"] == String(honest.prefix(8)) })
            // Counted as answered: the writer does not wait for it forever.
            #expect(await cluster[0].waitUntilSynced(timeout: .seconds(10)))
            // The link stays up, and the honest device's writes still reach the one that is ahead.
            try cluster.write("now", forKey: "present", on: 1)
            try await cluster.until("the honest write") { cluster[0].string(forKey: "present") == "now" }
            #expect(cluster[1].value(forKey: "early") == nil)
            // No reconnection loop (before, the refused delta closed the link about four times a
            // second): over three heartbeats, no new session and no new refusal. (A delta sent
            // before the refusal came back may still be refused once more: the window starts once
            // the honest device has heard two heartbeats more, sent after any such delta on the
            // same ordered link.)
            let quiet = cluster[1].heartbeatsReceived
            try await cluster.until("two heartbeats at the honest device") { cluster[1].heartbeatsReceived >= quiet + 2 }
            let sessions = cluster[1].syncMetrics?.sessions
            let refusals = capture.all.filter { $0.message.contains("refused 1 of 1 entries") }.count
            let window = cluster[1].heartbeatsReceived
            try await cluster.until("three heartbeats more at the honest device") { cluster[1].heartbeatsReceived >= window + 3 }
            #expect(cluster[1].syncMetrics?.sessions == sessions)
            #expect(capture.all.filter { $0.message.contains("refused 1 of 1 entries") }.count == refusals)

            // The clock is set right: what it wrote in the future is re-stamped and arrives, as do new writes.
            try await cluster.restart(0, clockSkew: .zero)
            #expect(await capture.waitFor("entries were written") != nil)
            try cluster.write("fixed", forKey: "later", on: 0)
            try await cluster.waitUntilConverged(expected: ["early": "from the future", "present": "now", "later": "fixed"])
            #expect(cluster[0].syncRefusals.isEmpty)
            #expect(await cluster[0].waitUntilSynced(timeout: .seconds(10)))
        }
    }

    @Test("Point 9: once SyncEngine.stop() returns, a delta it was verifying is never applied")
    func stopIsABarrier() async throws {
        // The property needs stop() to return while the verification is still going; when the
        // verification won the race (it runs beside stop, on other threads), the round proves
        // nothing and is tried again.
        for _ in 0..<10 {
            if try await stopDuringVerification() { return }
        }
        Issue.record("in 10 rounds, stop() never returned before the verification ended")
    }

    /// One round: false if the verification ended before stop() returned (nothing shown).
    private func stopDuringVerification() async throws -> Bool {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-barrier-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let owner = AccountStore(directory: URL(fileURLWithPath: "\(root)/a"), logger: Logger(label: "test"), scrypt: .testing)
        let a = try owner.createAccount(displayName: "Barrier", passphrase: "p", deviceName: "A")
        let bundle = try owner.exportJoinBundle(a.account.id)
        let b = try AccountStore(directory: URL(fileURLWithPath: "\(root)/b"), logger: Logger(label: "test"), scrypt: .testing).importJoinBundle(bundle, passphrase: "p", deviceName: "B")

        // A holds many entries, so that B spends a while verifying them.
        var replica = Replica(id: .random(boundTo: a.deviceID.data))
        let now = HybridLogicalClock.wallMilliseconds()
        for i in 0..<3000 { replica.write(.integer(Int64(i)), forKey: StoreKey("k\(i)"), wall: now) }
        let network = InMemoryNetwork()
        let sender = try SyncEngine(identity: a, replica: MemoryReplica(storeIdentifier: "s", replica: replica),
                                    options: .init(host: "127.0.0.1"), environment: network.environment(), logger: Logger(label: "test"))
        let events = Locked<[MemoryReplica.Call]>([])
        let verifying = AsyncStream<Void>.makeStream()
        let receiverReplica = MemoryReplica(storeIdentifier: "s") { [network] call in
            events.withLock { $0.append(call) }
            network.changes.signal()   // what the waits below look at
            if case .winningEntries(let count) = call, count == 3000 { verifying.continuation.yield() }
        }
        let receiver = try SyncEngine(identity: b, replica: receiverReplica, options: .init(host: "127.0.0.1"), environment: network.environment(),
                                      logger: Logger(label: "test"))
        let port = try await sender.start()
        try await receiver.start()
        receiver.addPeer(host: "127.0.0.1", port: port)

        // Stop the receiver while it verifies the big delta.
        var waiting = verifying.stream.makeAsyncIterator()
        _ = await waiting.next()
        await receiver.stop()
        let stoppedAt = events.withLock { $0.count }
        func ended(_ calls: ArraySlice<MemoryReplica.Call>) -> Bool { calls.contains { if case .wallAfterWinners = $0 { true } else { false } } }
        guard !ended(events.withLock { $0[..<stoppedAt] }) else {
            await sender.stop()
            return false
        }
        // Its verification ends a little later (the clock is read right after it); nothing may
        // follow, up to the end of its session (and of the sender's, whose link it closed).
        try await network.until("the end of the verification and of both sessions") {
            ended(events.withLock { $0[stoppedAt...] }) && network.linksInUse == 0
        }
        #expect(!events.withLock { $0[stoppedAt...].contains { if case .applyRemote = $0 { true } else { false } } })
        #expect(receiverReplica.replica.entries.count == 0)
        await sender.stop()
        return true
    }
}
