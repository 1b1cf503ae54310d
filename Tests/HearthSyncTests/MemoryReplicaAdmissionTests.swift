import Foundation
@testable import Hearth
import HearthCore
import HearthIdentity
import HearthSync
import HearthTestSupport
import Logging
import Testing

/// Issue 27 point 2: the sync tests' replica (`MemoryReplica`) admits what a peer sends exactly as
/// the store does, held-back entries and signers' shares included (it once applied everything).
/// In memory: both are driven through `SyncReplica` as a session drives them, with no engine.
@Suite("The sync tests' replica admits as the store does")
struct MemoryReplicaAdmissionTests {
    static let base: UInt64 = 1_700_000_000_000
    static let receiverDevice = Data(repeating: 0x10, count: 32)

    /// A device writing entries as a peer would send them: signed, under origins bound to it.
    struct Writer {
        let device: Data
        var origins: [ReplicaID]
        var sequences: [ReplicaID: UInt64] = [:]

        init(_ byte: UInt8, origins: Int) {
            device = Data(repeating: byte, count: 32)
            self.origins = (0..<origins).map { _ in ReplicaID.random(boundTo: Data(repeating: byte, count: 32)) }
        }

        mutating func entry(_ key: String, _ value: PropertyListValue?, at milliseconds: UInt64, using generator: inout SplitMix64) -> Entry {
            let origin = origins.randomElement(using: &generator)!
            sequences[origin, default: 0] += 1
            return Entry(key: StoreKey(key), value: value, timestamp: HLCTimestamp(milliseconds: milliseconds, counter: 0), origin: origin,
                         sequence: sequences[origin]!, signature: EntrySignature(signer: device, bytes: Data([1])))
        }
    }

    @Test("From a seed: what a peer sends (a member past its share, entries held back for their clock) is admitted alike", arguments: [1, 2, 3] as [UInt64])
    func sameAdmission(seed: UInt64) throws {
        var generator = SplitMix64(seed: seed)
        let id = ReplicaID.random(boundTo: Self.receiverDevice)
        let store = StoreBackend(storeIdentifier: "s", storage: nil, replica: Replica(id: id), logger: Logger(label: "test"),
                                 writeBehindDelay: .seconds(1), wall: { HybridLogicalClock.wallMilliseconds() })
        let memory = MemoryReplica(storeIdentifier: "s", replica: Replica(id: id))
        let replicas: [any SyncReplica] = [store, memory]
        // Everything the household wrote, as the peer that sends it holds it.
        var sender = Replica(id: .random())
        var honest = Writer(0x20, origins: 2), greedy = Writer(0x30, origins: 3)
        var time = Self.base, greedyKeys = 0
        var refusedShare = 0, heldOrigins = 0
        for round in 0..<30 {
            var written: [Entry] = []
            for _ in 0..<Int.random(in: 1...6, using: &generator) {
                time += 1
                let key = "h\(Int.random(in: 0..<30, using: &generator))"
                written.append(honest.entry(key, Bool.random(using: &generator) ? .integer(Int64(time)) : nil, at: time, using: &generator))
            }
            // A member writing far more keys than its share (StoreLimits.maximumSignerKeys), and
            // deleting some now and then.
            for _ in 0..<Int.random(in: 100...250, using: &generator) {
                time += 1
                let deletes = Int.random(in: 0..<10, using: &generator) == 0 && greedyKeys > 0
                let key = deletes ? "g\(Int.random(in: 0..<greedyKeys, using: &generator))" : "g\(greedyKeys)"
                if !deletes { greedyKeys += 1 }
                written.append(greedy.entry(key, deletes ? nil : .string("x"), at: time, using: &generator))
            }
            sender.apply(written, wall: HybridLogicalClock.wallMilliseconds())
            let vectors = replicas.map(\.syncVector)
            #expect(vectors[0] == vectors[1], "round \(round)")
            // As a session does: what wins goes through; some of it is held back (as stamped
            // too far ahead of the receiver's clock).
            let delta = sender.delta(for: vectors[0])
            let winners = replicas.map { $0.winningEntries(delta) }
            #expect(winners[0] == winners[1])
            var accepted: [Entry] = [], heldBack: [Entry] = []
            for entry in winners[0] {
                if Int.random(in: 0..<25, using: &generator) == 0 { heldBack.append(entry) } else { accepted.append(entry) }
            }
            let results = replicas.map { $0.applyRemote(accepted, heldBack: heldBack, reason: .serverChange) }
            #expect(results[0].changed == results[1].changed, "round \(round)")
            #expect(results[0].refused == results[1].refused, "round \(round)")
            if round % 5 == 4 {
                let devices = (0..<Int.random(in: 0...3, using: &generator)).map { _ in DeviceID(bytes: (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })! }
                for replica in replicas {
                    replica.learnOfDevices(devices)
                    replica.notePeer(DeviceID(bytes: honest.device)!, acknowledged: replica.syncVector)
                }
            }
            let held = store.state.withLock { $0.replica.heldBack }
            #expect(held == memory.heldBack, "round \(round)")
            #expect(store.replica.entries == memory.replica.entries, "round \(round)")
            #expect(store.knownDevices.sorted() == memory.knownDevices.sorted())
            refusedShare += results[1].refused.filter { $0.reason == .signerQuota }.count
            heldOrigins = max(heldOrigins, memory.heldBack.count)
        }
        // The run did reach the rules it compares.
        #expect(refusedShare > 0 && heldOrigins > 0)
        #expect(memory.replica.signerUsage[greedy.device]!.keys <= StoreLimits.maximumSignerKeys)
    }

    @Test("MemoryReplica keeps its vector below an entry held back, so the peer sends it again")
    func heldBackIsAskedAgain() {
        var writer = Writer(0x20, origins: 1)
        var generator = SplitMix64(seed: 7)
        let memory = MemoryReplica(storeIdentifier: "s", replica: Replica(id: .random(boundTo: Self.receiverDevice)))
        let ahead = writer.entry("a", 1, at: Self.base, using: &generator), next = writer.entry("b", 2, at: Self.base + 1, using: &generator)
        let (changed, refused) = memory.applyRemote([next], heldBack: [ahead], reason: .serverChange)
        #expect(changed == ["b"] && refused.isEmpty)
        // Before, the vector covered both: the held entry was never sent again.
        #expect(memory.syncVector[ahead.origin] == 0)
        // Nor does it relay the later entry: a receiver's vector would advance to it and cover the
        // held one, which neither has (docs/simulator.md, finding 5).
        #expect(memory.syncDelta(for: VersionVector()).entries.isEmpty)
    }
}
