import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import HearthTesting
import Logging
import Testing

/// A change is encoded once for all the links it goes to (issue 27: each link encoded its delta
/// apart, so a writer with 7 peers encoded each change 7 times): the same delta on several
/// links is the same bytes, made once (`SyncStore.payload(of:sender:)`).
@Suite("Encoded once")
struct EncodeOnceTests {
    @Test("A writer in an 8-device in-memory mesh encodes each of 30 changes once, though it sends each to 7 peers (figures printed)",
          .timeLimit(.minutes(1)))
    func eightDeviceMesh() async throws {
        var logger = Logger(label: "encode-once")
        logger.logLevel = .warning
        let authority = try AccountAuthority.create(displayName: "Encode once")
        let identities = try (0..<8).map { try authority.makeDevice(named: "device-\($0)") }
        let network = InMemoryNetwork()
        let convergence = Convergence()
        // Origins bound to their device, as a store makes them (a receiver refuses others).
        let replicas = identities.map { identity in
            MemoryReplica(storeIdentifier: "com.example.encode", replica: Replica(id: ReplicaID.random(boundTo: identity.deviceID.data)),
                          applied: { convergence.check() })
        }
        convergence.watch(replicas)
        let engines = try identities.enumerated().map { index, identity in
            try SyncEngine(identity: identity, replica: replicas[index], options: .init(host: "memory"),
                           environment: network.environment(), logger: logger)
        }
        var ports: [Int] = []
        for engine in engines { ports.append(try await engine.start()) }
        for i in 0..<engines.count {
            for j in (i + 1)..<engines.count { engines[i].addPeer(host: "memory", port: ports[j]) }
        }
        try await network.until("a full mesh") { engines.allSatisfy { $0.connectedPeers.count == engines.count - 1 } }
        // Each link's first delta is whole; a first change makes them.
        try replicas[0].write(.string("warm"), forKey: "warm")
        await convergence.wait()

        let writer = engines[0].metrics
        let encodedBefore = writer.deltasEncoded
        let sentBefore = writer.snapshot.sentByType["delta"]?.messages ?? 0
        let changes = 30
        for index in 0..<changes {
            // One change at a time: all 7 sessions wake for it at once.
            try replicas[0].write(.integer(Int64(index)), forKey: StoreKey("k\(index)"))
            await convergence.wait()
        }
        let encoded = writer.deltasEncoded - encodedBefore
        let sent = (writer.snapshot.sentByType["delta"]?.messages ?? 0) - sentBefore
        print("8-device mesh, \(changes) changes by one writer: \(sent) deltas sent (\(Double(sent) / Double(changes)) a change), "
              + "\(encoded) encoded (\(Double(encoded) / Double(changes)) a change)")
        // Never more than one encoding a change. Usually exactly one, sent on all 7 links; a
        // slow session (ThreadSanitizer) may find its peer already served by a relay and send
        // nothing, so a change may be sent on fewer links, or encoded for none of them (seen: 29
        // encodings and 203 deltas for 30 changes). Encoding per link gives about 1 link an encoding.
        #expect(encoded <= changes, "\(encoded) encodings for \(changes) changes")
        #expect(encoded > 0 && Double(sent) / Double(encoded) > 5, "\(sent) deltas sent from \(encoded) encodings")
        for engine in engines { await engine.stop() }
    }
}
