import Foundation
import HearthCore
import HearthTestSupport
import Testing

@Suite("Replica: entries, version vectors, last-writer-wins")
struct ReplicaTests {
    let a = ReplicaID(high: 0xA, low: 0)
    let b = ReplicaID(high: 0xB, low: 0)

    @Test("The usage and the per-origin and per-signer tallies equal a recount after rewrites, deletes, merges and signatures")
    func talliesStayExact() {
        var r = Replica()
        var generator = SystemRandomNumberGenerator()
        let others = (0..<3).map { _ in ReplicaID.random() }
        let signers = [Data([1]), Data([2])]
        for step in 0..<3000 {
            let key = StoreKey("k\(Int.random(in: 0..<20, using: &generator))")
            let wall = UInt64(2_000_000_000_000 + step)
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<5: r.write(.string(String(repeating: "x", count: step % 50)), forKey: key, wall: wall)
            case 5: r.write(nil, forKey: key, wall: wall)
            case 6..<8:
                let origin = others.randomElement(using: &generator)!
                let signature = Bool.random(using: &generator) ? EntrySignature(signer: signers.randomElement(using: &generator)!, bytes: Data([9])) : nil
                r.merge(Entry(key: key, value: Bool.random(using: &generator) ? .integer(Int64(step)) : nil,
                              timestamp: HLCTimestamp(milliseconds: UInt64(2_000_000_000_000 + step), counter: 0),
                              origin: origin, sequence: UInt64(step + 1), signature: signature), wall: wall)
            default:
                if let entry = r.entries[key] {
                    r.attach(EntrySignature(signer: signers.randomElement(using: &generator)!, bytes: Data([7])),
                             forKey: key, origin: entry.origin, sequence: entry.sequence)
                }
            }
        }
        let live = r.entries.values.filter { !$0.isTombstone }
        #expect(r.usage == Replica.Usage(bytes: live.reduce(0) { $0 + $1.key.utf8.count + $1.value!.canonicalSize }, keys: live.count))
        #expect(r.originEntries == Dictionary(grouping: r.entries.values, by: \.origin).mapValues(\.count))
        var signer: [Data: Replica.SignerUsage] = [:]
        for entry in r.entries.values {
            guard let id = entry.signature?.signer else { continue }
            if entry.isTombstone { signer[id, default: .init()].tombstones += 1 } else {
                signer[id, default: .init()].bytes += entry.quotaSize
                signer[id, default: .init()].keys += 1
            }
        }
        #expect(r.signerUsage == signer)
    }

    @Test("Local writes stamp increasing timestamps and sequence numbers and advance the vector")
    func localWrites() throws {
        var r = Replica(id: a)
        let result1 = r.write("x", forKey: "k", wall: 100)
        let e1 = try #require(result1)
        let result2 = r.write("y", forKey: "k", wall: 100)
        let e2 = try #require(result2)
        #expect(e1.sequence == 1 && e2.sequence == 2)
        #expect(e2.timestamp > e1.timestamp)
        #expect(r.vector[a] == 2)
        #expect(r.value(forKey: "k") == "y")
        #expect(r.usage == Replica.Usage(bytes: 1 + 6, keys: 1))
    }

    @Test("Deleting an absent key is a no-op; deleting a present one leaves a tombstone that costs nothing")
    func deletes() throws {
        var r = Replica(id: a)
        let result3 = r.write(nil, forKey: "k", wall: 1)
        #expect(result3 == nil)
        #expect(r.sequence == 0)
        r.write(1, forKey: "k", wall: 2)
        let result4 = r.write(nil, forKey: "k", wall: 3)
        let tombstone = try #require(result4)
        #expect(tombstone.isTombstone)
        #expect(r.value(forKey: "k") == nil)
        #expect(r.entries["k"] != nil)
        #expect(r.usage == Replica.Usage())
        let result5 = r.write(nil, forKey: "k", wall: 4)
        #expect(result5 == nil)
    }

    @Test("The greater (timestamp, origin) wins, for values and tombstones alike")
    func lastWriterWins() {
        var r = Replica(id: a)
        let old = Entry(key: "k", value: "old", timestamp: HLCTimestamp(rawValue: 10), origin: b, sequence: 1)
        let new = Entry(key: "k", value: "new", timestamp: HLCTimestamp(rawValue: 20), origin: b, sequence: 2)
        let tie = Entry(key: "k", value: "tie", timestamp: HLCTimestamp(rawValue: 20), origin: a, sequence: 1)
        let delete = Entry(key: "k", value: nil, timestamp: HLCTimestamp(rawValue: 30), origin: a, sequence: 2)
        let result6 = r.merge(new, wall: 0)
        #expect(result6)
        let result7 = r.merge(old, wall: 0)
        #expect(!result7)
        #expect(r.value(forKey: "k") == "new")
        let tieApplied = r.merge(tie, wall: 0)
        #expect(!tieApplied)  // same time, smaller origin loses
        let result8 = r.merge(delete, wall: 0)
        #expect(result8)
        #expect(r.value(forKey: "k") == nil)
        let resurrected = r.merge(new, wall: 0)
        #expect(!resurrected)  // the tombstone is newer: no resurrection
    }

    @Test("Merging is order-independent: any permutation of the same entries converges")
    func convergence() {
        var rng = SplitMix64(seed: 42)
        var writers = (0..<4).map { Replica(id: ReplicaID(high: UInt64($0 + 1), low: 0)) }
        var all: [Entry] = []
        for i in 0..<400 {
            let w = Int(rng.next() % 4)
            let key = StoreKey("k\(rng.next() % 10)")
            let value: PropertyListValue? = rng.next() % 5 == 0 ? nil : .integer(Int64(i))
            if let e = writers[w].write(value, forKey: key, wall: 1000 + rng.next() % 50) { all.append(e) }
        }
        var reference: [StoreKey: PropertyListValue]?
        for _ in 0..<10 {
            var r = Replica(id: ReplicaID(high: 99, low: 0))
            r.apply(all.shuffled(using: &rng), wall: 2000)
            if let reference { #expect(r.visibleValues == reference) } else { reference = r.visibleValues }
        }
    }

    @Test("A delta holds exactly the entries the peer's vector does not cover")
    func delta() {
        var r = Replica(id: a)
        for i in 1...1000 { r.write(.integer(Int64(i)), forKey: StoreKey("k\(i)"), wall: 5) }
        var peer = Replica(id: b)
        let result9 = peer.apply(r.delta(for: peer.vector), coveredBy: r.vector, wall: 5)
        #expect(result9.count == 1000)
        #expect(peer.visibleValues == r.visibleValues)
        r.write("changed", forKey: "k7", wall: 6)
        let delta = r.delta(for: peer.vector)
        #expect(delta.count == 1)
        #expect(delta.first?.key == "k7")
        let result10 = peer.apply(delta, coveredBy: r.vector, wall: 6)
        #expect(result10 == ["k7"])
        #expect(r.delta(for: peer.vector).isEmpty)
    }

    @Test("apply reports only keys whose visible value changed")
    func applyReportsChanges() {
        var r = Replica(id: a)
        r.write("same", forKey: "x", wall: 1)
        let sameValue = Entry(key: "x", value: "same", timestamp: HLCTimestamp(milliseconds: 9, counter: 0), origin: b, sequence: 1)
        let setY = Entry(key: "y", value: 1, timestamp: HLCTimestamp(milliseconds: 9, counter: 0), origin: b, sequence: 2)
        let unsetY = Entry(key: "y", value: nil, timestamp: HLCTimestamp(milliseconds: 9, counter: 1), origin: b, sequence: 3)
        let result11 = r.apply([sameValue, setY, unsetY], wall: 10)
        #expect(result11 == [])
        #expect(r.vector[b] == 3)
    }

    @Test("Tombstones are collected once covered by every peer, or past the horizon")
    func tombstoneCollection() {
        var r = Replica(id: a)
        r.write(1, forKey: "gone", wall: 1)
        r.write(nil, forKey: "gone", wall: 2)
        r.write(1, forKey: "kept", wall: 3)
        let result12 = r.collectTombstones(coveredBy: VersionVector([a: 1]))
        #expect(result12 == 0)
        let result13 = r.collectTombstones(coveredBy: VersionVector([a: 2]))
        #expect(result13 == 1)
        #expect(r.entries["gone"] == nil && r.entries["kept"] != nil)
        r.write(nil, forKey: "kept", wall: 4)
        let result14 = r.collectTombstones(olderThan: HLCTimestamp(milliseconds: 4, counter: 0))
        #expect(result14 == 0)
        let result15 = r.collectTombstones(olderThan: HLCTimestamp(milliseconds: 5, counter: 0))
        #expect(result15 == 1)
    }

    @Test("A replica that collects a tombstone keeps its origin's counter, so a peer that has not heard yet can collect its copy")
    func collectingKeepsTheCounter() {
        // CI's PartitionTests once saw this order: C applies A's delete when B has already said
        // it has it, so C collects it at once; B still holds C's vector from before the delete.
        var writer = Replica(id: a), b = Replica(id: self.b), c = Replica(id: ReplicaID(high: 0xC, low: 0))
        let value = writer.write("x", forKey: "x", wall: 1)!
        b.apply([value], coveredBy: writer.vector, wall: 1)
        c.apply([value], coveredBy: writer.vector, wall: 1)
        c.write("C's", forKey: "y", wall: 2)
        let cBefore = c.vector
        let delete = writer.write(nil, forKey: "x", wall: 3)!
        b.apply([delete], coveredBy: writer.vector, wall: 3)
        b.notePeer("writer", acknowledged: writer.vector)
        b.notePeer("c", acknowledged: cBefore)
        #expect(b.collectTombstones(coveredBy: b.stableVector) == 0)

        c.apply([delete], coveredBy: writer.vector, wall: 3)
        c.notePeer("writer", acknowledged: writer.vector)
        c.notePeer("b", acknowledged: b.vector)
        #expect(c.collectTombstones(coveredBy: c.stableVector) == 1)
        #expect(c.originEntries[a] == nil)
        #expect(c.vector[a] == 2, "the counter went with the tombstone: \(c.vector)")
        // A later merge compacts the vector again; the counter stays.
        c.apply([Entry(key: "z", value: 1, timestamp: HLCTimestamp(milliseconds: 4, counter: 0), origin: self.b, sequence: 9)], wall: 4)
        #expect(c.vector[a] == 2)

        b.notePeer("c", acknowledged: c.vector)
        #expect(b.collectTombstones(coveredBy: b.stableVector) == 1)
        #expect(b.entries["x"] == nil)

        // The next run drops the counter; a peer that still has the tombstone sends it again,
        // and the replica collects it anew, keeping the counter this time.
        var reopened = c.reopened(as: .random())
        #expect(reopened.vector[a] == 0)
        reopened.apply([delete], coveredBy: writer.vector, wall: 5)
        #expect(reopened.collectTombstones(coveredBy: reopened.stableVector) == 1)
        #expect(reopened.vector[a] == 2 && reopened.entries["x"] == nil)
    }

    @Test("Restoring raises the sequence to what the entries show; a write after it still beats its key's entry")
    func restore() throws {
        let e = Entry(key: "k", value: 1, timestamp: HLCTimestamp(milliseconds: 500, counter: 3), origin: a, sequence: 9)
        var r = Replica(id: a, clock: HybridLogicalClock(), sequence: 2, vector: VersionVector(), entries: ["k": e])
        #expect(r.sequence == 9)
        #expect(r.vector[a] == 9)
        #expect(r.usage.keys == 1)
        // The clock is not raised to the entries (a peer's may be hours ahead), but the key's entry bounds its next write.
        let result = r.write(2, forKey: "k", wall: 100)
        let next = try #require(result)
        #expect(next.timestamp > e.timestamp && next.sequence == 10)
    }

    /// A member's device prefix, and entries it signs (the signature bytes are not checked here).
    static let member = Data(repeating: 0x66, count: 32)
    static func memberEntry(_ key: StoreKey, _ value: PropertyListValue?, at milliseconds: UInt64, origin: ReplicaID, sequence: UInt64) -> Entry {
        Entry(key: key, value: value, timestamp: HLCTimestamp(milliseconds: milliseconds, counter: 0), origin: origin, sequence: sequence,
              signature: EntrySignature(signer: member, bytes: Data([1])))
    }

    /// docs/simulator.md, finding 10 (`scripts/sim.sh --seed 2 --hours 0.5 --thief`): only the
    /// device that took the thief's write ever had D's write; the peers' whole store holds only an
    /// older value. D keeps what the thief's write displaced and restores it when it drops it.
    @Test("Issue 28, finding 10: D's write of k, replaced by a thief's later write before it left D, comes back when D drops the thief's write, and beats the older value of the peer's whole store; it survives a restart")
    func droppedWriteTakesWhatItReplaced() throws {
        let removedAt: UInt64 = 1_700_000_000_000
        var peer = Replica(id: a)
        peer.write("older", forKey: "k", wall: removedAt - 10)
        var d = Replica(id: ReplicaID(high: 0xD, low: 0))
        d.apply(Array(peer.entries.values), wall: removedAt - 5)
        // Away with the thief: D writes k, then takes the thief's write, stamped after the removal.
        d.write("D's", forKey: "k", wall: removedAt + 1)
        d.apply([Self.memberEntry("k", "the thief's", at: removedAt + 2, origin: .random(boundTo: Self.member), sequence: 1)], wall: removedAt + 3)
        #expect(d.displaced["k"]?.map(\.value) == ["D's"])
        // Saved and loaded (a restart between the thief's write and the removal).
        let header = ReplicaFile.Header(storeIdentifier: "s", account: "")
        d = try ReplicaFile.decode(ReplicaFile.encode(d, header: header), path: "test").replica
        // D hears of the removal: it drops the thief's write and is sent the peer's whole store.
        #expect(d.dropEntries(signedBy: Self.member, stampedAfter: removedAt).map(\.key) == ["k"])
        #expect(d.entries["k"]?.value == "D's", "restored at once")
        #expect(d.vector.covers(try #require(d.entries["k"])))
        d.apply(Array(peer.entries.values), wall: removedAt + 4)
        #expect(d.entries["k"]?.value == "D's")
        #expect(d.displaced.isEmpty)
    }

    /// docs/simulator.md, finding 10 (`scripts/sim.sh --seed 5 --hours 0.5 --thief`): the removed
    /// device's own earlier write (a removal stamped before its removal) was replaced here by its
    /// thief's later write; what comes back is that earlier write, not the older value of another
    /// device it had replaced. A removed device's later write is never brought back.
    @Test("Issue 28, finding 10: a removed device's later write replacing its own earlier one gives back the earlier one; two later writes give back the other device's value before them")
    func droppedWriteOverItsOwnEarlierWrite() {
        let removedAt: UInt64 = 1_700_000_000_000
        let thief = ReplicaID.random(boundTo: Self.member)
        var d = Replica(id: a)
        d.write("D's", forKey: "k", wall: removedAt - 10)
        d.write("D's", forKey: "j", wall: removedAt - 10)
        d.apply([Self.memberEntry("k", nil, at: removedAt - 5, origin: thief, sequence: 1),
                 Self.memberEntry("j", "late 1", at: removedAt + 1, origin: thief, sequence: 2)], wall: removedAt)
        d.apply([Self.memberEntry("k", "the thief's", at: removedAt + 2, origin: thief, sequence: 3),
                 Self.memberEntry("j", "late 2", at: removedAt + 3, origin: thief, sequence: 4)], wall: removedAt + 3)
        #expect(d.dropEntries(signedBy: Self.member, stampedAfter: removedAt).map(\.key) == ["j", "k"])
        #expect(d.entries["k"]?.isTombstone == true && d.entries["k"]?.origin == thief, "the removal made before it was removed")
        #expect(d.entries["j"]?.value == "D's")
    }

    /// docs/simulator.md, finding 10 (`scripts/sim.sh --seed 7 --hours 0.5 --thief`): P refused
    /// the thief's write but its vector covers D's write, which the thief's had replaced where P
    /// got its vector from; P has no entry of the key. D restored its write and asked P for its
    /// whole store, giving its own: P wants D's whole store in turn, and takes the write.
    @Test("Issue 28, finding 10: a peer whose vector covers a restored entry it lacks takes it from the dropping device's whole store once asked for its own (wantWhole), not before")
    func restoredEntryReachesACoveredPeer() {
        let removedAt: UInt64 = 1_700_000_000_000
        var d = Replica(id: a)
        d.write("D's", forKey: "k", wall: removedAt + 1)
        d.apply([Self.memberEntry("k", "the thief's", at: removedAt + 2, origin: .random(boundTo: Self.member), sequence: 1)], wall: removedAt + 3)
        // A later write of D keeps D's counter in P's vector, past the write P never had.
        var covered = Replica(id: b)
        covered.apply([d.write("D's other", forKey: "other", wall: removedAt + 3)!], coveredBy: d.vector, wall: removedAt + 3)
        var p = SyncedReplica(covered)
        _ = d.dropEntries(signedBy: Self.member, stampedAfter: removedAt)
        let whole = d.delta(for: VersionVector())
        #expect(p.winningEntries(whole).isEmpty, "covered, and no entry of the key: a replay of a collected removal's value, refused")
        p.wantWhole()
        let taken = p.winningEntries(whole)
        #expect(taken.map(\.key) == ["k"])
        _ = p.applyRemote(taken, heldBack: [], wall: removedAt + 4)
        #expect(p.replica.entries["k"]?.value == "D's")
    }

    @Test("Issue 28, the thief's copy: a removed device's entries stamped after its removal are dropped, with their tallies; its earlier ones and the others' stay, and the vector is kept")
    func dropRemovedDevicesLaterEntries() throws {
        var r = Replica(id: a)
        let origin = ReplicaID.random(boundTo: Self.member)
        let removedAt: UInt64 = 1_700_000_000_000
        r.write("ours", forKey: "mine", wall: removedAt)
        r.apply([Self.memberEntry("early", "before", at: removedAt - 1, origin: origin, sequence: 1),
                 Self.memberEntry("late", "after", at: removedAt + 1, origin: origin, sequence: 2),
                 Self.memberEntry("gone", nil, at: removedAt + 2, origin: origin, sequence: 3)], wall: removedAt + 3)
        let vector = r.vector
        let dropped = r.dropEntries(signedBy: Self.member, stampedAfter: removedAt)
        #expect(dropped.map(\.key) == ["gone", "late"])
        #expect(r.entries["early"]?.value == "before" && r.entries["mine"]?.value == "ours")
        #expect(r.entries["late"] == nil && r.entries["gone"] == nil)
        #expect(r.vector == vector, "the entries they replaced come from the peers' whole stores, not a lowered vector")
        let early = try #require(r.entries["early"]), mine = try #require(r.entries["mine"])
        #expect(r.usage == Replica.Usage(bytes: early.quotaSize + mine.quotaSize, keys: 2))
        #expect(r.signerUsage[Self.member] == Replica.SignerUsage(bytes: early.quotaSize, keys: 1, tombstones: 0))
        #expect(r.originEntries[origin] == 1)
        let again = r.dropEntries(signedBy: Self.member, stampedAfter: removedAt)
        #expect(again.isEmpty)
        // The peers' whole store is wanted until one comes, through a restart too.
        #expect(r.wantsWhole)
        let header = ReplicaFile.Header(storeIdentifier: "s", account: "")
        let back = try ReplicaFile.decode(try ReplicaFile.encode(r, header: header), path: "test").replica
        #expect(back.wantsWhole && back.reopened(as: .random()).wantsWhole)
        var done = SyncedReplica(back)
        done.wholeReceived()
        #expect(try !ReplicaFile.decode(try ReplicaFile.encode(done.replica, header: header), path: "test").replica.wantsWhole)
    }

    @Test("Issue 26 point 4: a member stamping 12 h − 100 ms ahead every 100 ms does not drag this replica's writes ahead of a peer 3 s behind; a write of the member's key still beats it, and says why it is ahead")
    func futureStampsDoNotDragWrites() throws {
        var victim = Replica(id: a)
        let memberOrigin = ReplicaID.random(boundTo: Self.member)
        let start: UInt64 = 1_700_000_000_000
        for step in UInt64(1)...300 {
            let wall = start + step * 100
            victim.apply([Self.memberEntry(StoreKey("m\(step % 7)"), .integer(Int64(step)), at: wall + HybridLogicalClock.maximumDrift - 100,
                                           origin: memberOrigin, sequence: step)], wall: wall)
            let result = victim.write(.integer(Int64(step)), forKey: "victim-counter", wall: wall)
            let written = try #require(result)
            // What the slower peer checks (SyncStore.check): within the drift bound of its clock.
            #expect(HybridLogicalClock.isAcceptable(written.timestamp, wall: wall - 3000),
                    "the victim's write is stamped \(Double(written.timestamp.milliseconds - wall) / 3_600_000) h ahead")
            #expect(victim.imposedLeads["victim-counter"] == nil)
        }
        // The same holds after a restart, with the member's entries in the file.
        var reopened = victim.reopened(as: ReplicaID(high: 0xC, low: 0))
        let wall = start + 40_000
        let result1 = reopened.write("after restart", forKey: "other", wall: wall)
        let other = try #require(result1)
        #expect(HybridLogicalClock.isAcceptable(other.timestamp, wall: wall - 3000))
        // A write of a key the member stamped ahead beats the member's value (it was made after
        // seeing it), though it is as far ahead; it is noted as the member's doing.
        let memberValue = try #require(reopened.entries["m3"])
        let result2 = reopened.write("mine", forKey: "m3", wall: wall)
        let overwrite = try #require(result2)
        #expect(overwrite.wins(over: memberValue))
        let lead = try #require(reopened.imposedLeads["m3"])
        #expect(lead.signer == Self.member && lead.origin == memberOrigin)
        #expect(lead.lead > HybridLogicalClock.maximumDrift - 60_000)
        // Written again, still the member's doing; the clock stayed near the wall clock.
        let result3 = reopened.write("mine again", forKey: "m3", wall: wall + 1)
        let again = try #require(result3)
        #expect(again.wins(over: overwrite) && reopened.imposedLeads["m3"]?.origin == memberOrigin)
        #expect(reopened.clock.last.milliseconds <= wall + HybridLogicalClock.maximumLead + 1)
        #expect(lead.sequence == overwrite.sequence && reopened.imposedLeads["m3"]?.sequence == again.sequence)
        // Replaced by a peer's later write, it is still known for that write (a refusal may come later);
        // a write of the key near the clock forgets it.
        reopened.apply([Self.memberEntry("m3", nil, at: wall + 3, origin: memberOrigin, sequence: 1000)], wall: wall + 2)
        #expect(reopened.imposedLeads["m3"]?.sequence == again.sequence)
        let bothNear = ReplicaID(high: 0xD, low: 0)
        var near = Replica(id: bothNear)
        near.apply([Self.memberEntry("n", 1, at: wall, origin: memberOrigin, sequence: 1)], wall: wall)
        near.write(2, forKey: "n", wall: wall)
        #expect(near.imposedLeads.isEmpty)
    }

    @Test("Issue 26 point 5: 4,200 origins of one member, 2 deletes each, do not evict an honest device's origin; its writes are covered (confirmed) before and after")
    func fairVectorEviction() throws {
        let honestDevice = Data(repeating: 0x11, count: 32)
        var victim = Replica(id: ReplicaID.random(boundTo: Data(repeating: 0x22, count: 32)))
        var honest = Replica(id: ReplicaID.random(boundTo: honestDevice))
        let wall: UInt64 = 1_700_000_000_000
        honest.write(1, forKey: "honest", wall: wall)
        victim.apply(honest.delta(for: victim.vector), wall: wall)
        #expect(victim.vector[honest.id] == 1)
        // Another honest device with a few origins (runs) of its own, each owning a key.
        let other = Data(repeating: 0x33, count: 32)
        let otherOrigins = (0..<5).map { _ in ReplicaID.random(boundTo: other) }
        victim.apply(otherOrigins.enumerated().map { index, origin in
            Entry(key: StoreKey("other-\(index)"), value: 1, timestamp: HLCTimestamp(milliseconds: wall, counter: 0), origin: origin, sequence: 1)
        }, wall: wall)
        // The member: 4,200 origins, 2 deletes each, in deltas of 8,192 entries at most.
        var flood: [Entry] = []
        for i in 0..<4200 {
            let origin = ReplicaID.random(boundTo: Self.member)
            for j in 0..<2 { flood.append(Self.memberEntry(StoreKey("gone-\(i)-\(j)"), nil, at: wall + 1, origin: origin, sequence: UInt64(j + 1))) }
        }
        for start in stride(from: 0, to: flood.count, by: 8192) {
            victim.apply(Array(flood[start..<min(start + 8192, flood.count)]), wall: wall + 2)
        }
        #expect(victim.vector.counters.count == Replica.maximumVectorOrigins)
        #expect(victim.vector[honest.id] == 1, "the honest origin was evicted")
        #expect(otherOrigins.allSatisfy { victim.vector[$0] == 1 })
        // The honest device writes on: each write is covered by what the victim acknowledges.
        for step in UInt64(2)...5 {
            honest.write(.integer(Int64(step)), forKey: "honest", wall: wall + step)
            victim.apply(honest.delta(for: victim.vector), wall: wall + step)
            #expect(victim.vector[honest.id] == honest.sequence)
            #expect(victim.delta(for: honest.vector).allSatisfy { !$0.origin.isBound(to: honestDevice) })
        }
        #expect(victim.value(forKey: "honest") == 5)
    }

    @Test("Signatures attach only to the entry they were made for")
    func attach() throws {
        var r = Replica(id: a)
        let result16 = r.write(1, forKey: "k", wall: 1)
        let e = try #require(result16)
        let sig = EntrySignature(signer: Data(repeating: 1, count: 32), bytes: Data(repeating: 2, count: 64))
        r.write(2, forKey: "k", wall: 2)
        let result17 = r.attach(sig, forKey: "k", origin: a, sequence: e.sequence)
        #expect(!result17)
        let result18 = r.attach(sig, forKey: "k", origin: a, sequence: 2)
        #expect(result18)
        #expect(r.entries["k"]?.signature == sig)
    }

    @Test("A reopened replica writes under a new ID and gets back from peers the writes it sent but lost")
    func reopenAfterCrash() {
        var r = Replica(id: a), peer = Replica(id: b)
        r.write("saved", forKey: "k1", wall: 1)
        let onDisk = r                                   // the last save before the crash
        r.write("sent, never saved", forKey: "k2", wall: 2)
        peer.apply(r.delta(for: peer.vector), coveredBy: r.vector, wall: 3)

        var next = onDisk.reopened(as: ReplicaID(high: 0xC, low: 0))
        #expect(next.id != a && next.sequence == 0)
        next.write("after restart", forKey: "k3", wall: 4)
        // The peer sends k2 back; the restarted replica sends k3, under a pair nobody has seen.
        next.apply(peer.delta(for: next.vector), coveredBy: peer.vector, wall: 5)
        peer.apply(next.delta(for: peer.vector), coveredBy: next.vector, wall: 5)
        #expect(next.visibleValues == ["k1": "saved", "k2": "sent, never saved", "k3": "after restart"])
        #expect(peer.visibleValues == next.visibleValues)
    }

    @Test("Reopening drops vector counters of origins that no longer have an entry")
    func reopenPrunesVector() {
        var r = Replica(id: a)
        r.merge(Entry(key: "k", value: 1, timestamp: HLCTimestamp(milliseconds: 1, counter: 0), origin: b, sequence: 4), wall: 1)
        r.apply([], coveredBy: VersionVector([b: 4, ReplicaID(high: 9, low: 9): 7]), wall: 1)
        let next = r.reopened(as: .random())
        #expect(next.vector[b] == 4)
        #expect(next.vector[ReplicaID(high: 9, low: 9)] == 0)
        #expect(next.entries == r.entries)
    }
}
