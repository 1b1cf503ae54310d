import Foundation
@testable import Hearth
import HearthCore
import Logging
import Testing

/// What the host does to its store for attached processes (``StoreHost``'s store side, which
/// takes the store, not the socket): their writes applied once each, refused alone, and the
/// snapshot a new one gets. In memory; the socket's side is LocalAttachTests'.
@Suite("The host's store side, in memory")
struct StoreHostTests {
    let origin = ReplicaID.random()
    let now = HybridLogicalClock.wallMilliseconds()

    func store() -> StoreBackend {
        StoreBackend(storeIdentifier: "s", storage: nil, replica: Replica(), logger: Logger(label: "test"), writeBehindDelay: .seconds(1),
                     wall: { HybridLogicalClock.wallMilliseconds() })
    }

    func entry(_ key: String, _ value: Int64, sequence: UInt64, at offset: UInt64 = 0) -> Entry {
        Entry(key: StoreKey(key), value: .integer(value), timestamp: HLCTimestamp(milliseconds: now + offset, counter: 0),
              origin: origin, sequence: sequence)
    }

    @Test("A write sent again after a reattach is acknowledged, not applied again; a refused one is refused once")
    func appliesOnce() throws {
        let backend = store()
        let first = StoreHost.apply([entry("a", 1, sequence: 1)], undecodable: [], to: backend)
        #expect(first.applied[origin] == 1 && first.refused.isEmpty)
        #expect(backend.value(forKey: "a") == .integer(1))
        #expect(backend.state.withLock { $0.attachedApplied } == [origin: 1])

        // The same origin and sequence again, but a later timestamp: had it been applied, it would win.
        let again = StoreHost.apply([entry("a", 2, sequence: 1, at: 10)], undecodable: [], to: backend)
        #expect(again.applied[origin] == 1, "acknowledged again, so the client forgets it once durable")
        #expect(backend.value(forKey: "a") == .integer(1), "at or below what was applied of its origin: skipped")

        // One entry the store cannot take, between two it can: refused alone, with its code. The
        // per-entry rules are applied as the message is read, as the host reads it.
        let long = String(repeating: "k", count: StoreLimits.maximumKeyLength + 1)
        let message = try LocalMessage.decode(LocalMessage.write([entry("b", 3, sequence: 2), entry(long, 4, sequence: 3),
                                                                  entry("c", 5, sequence: 4)]).encoded())
        guard case .write(let readable) = message.message else { Issue.record("not a write: \(message.message)"); return }
        let mixed = StoreHost.apply(readable, undecodable: message.undecodable, to: backend)
        #expect(mixed.applied[origin] == 4)
        #expect(mixed.refused.map(\.sequence) == [3])
        #expect(mixed.refused.first?.code == KeyValueStoreError.Code.keyTooLong.rawValue)
        #expect(backend.value(forKey: "b") == .integer(3) && backend.value(forKey: "c") == .integer(5))
        #expect(mixed.changed.map(\.key) == ["b", "c"], "the entries for the other attached processes, as the store holds them")

        // Sent again (the client did not see the refusal before its connection ended): not refused twice.
        let resent = StoreHost.apply([entry("c", 5, sequence: 4)], undecodable: [], to: backend)
        #expect(resent.refused.isEmpty && resent.applied[origin] == 4 && resent.changed.isEmpty)
    }

    @Test("The snapshot holds every entry once, in parts of at most 4,096 entries and about 1 MB, the last one saying so")
    func snapshotParts() {
        let backend = store()
        let many = (0..<5000).map { entry("k\($0)", Int64($0), sequence: UInt64($0) + 1) }
        backend.applyExternal(many, coveredBy: nil, reason: .serverChange)
        let parts = StoreHost.snapshot(of: backend, reason: nil).map { message -> LocalMessage.Snapshot? in
            if case .snapshot(let snapshot) = message { return snapshot }
            return nil
        }
        #expect(parts.map { $0?.entries.count } == [4096, 904])
        #expect(parts.map { $0?.more } == [true, false])
        #expect(Set(parts.flatMap { $0?.entries.map(\.key.string) ?? [] }).count == 5000)
        #expect(parts.allSatisfy { $0?.account == "" && $0?.device.isEmpty == true }, "a memory store: signed out")

        // Large values: a part is closed before it would pass about 1 MB (a frame holds 4 MiB).
        let large = (0..<3).map { i in
            Entry(key: StoreKey("v\(i)"), value: .data(Data(count: 600_000)), timestamp: HLCTimestamp(milliseconds: now, counter: 0),
                  origin: origin, sequence: UInt64(i) + 1)
        }
        #expect(StoreHost.parts(large).map(\.count) == [1, 1, 1])
        #expect(StoreHost.parts(Array(large.prefix(1)) + many.prefix(10)).map(\.count) == [11])
        #expect(StoreHost.parts([]).map(\.count) == [0], "an empty store still gets its one (last) part")
    }
}
