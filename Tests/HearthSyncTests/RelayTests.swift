import Foundation
import Logging
import Hearth
import HearthCore
import HearthIdentity
import HearthTestSupport
import HearthTesting
import Testing

@Suite("Relays and concurrent writers")
struct RelayTests {
    @Test("A line A–B–C: A's write reaches C, which verified A's signature")
    func line() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 3, topology: .line, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            try await cluster.waitUntilConnected()
            let (a, c) = (cluster[0], cluster[2])
            a.set("from A", forKey: "relayed")
            try await cluster.until("C to receive A's write") { c.string(forKey: "relayed") == "from A" }
            let entry = try #require(c.internals.replica.entries["relayed"])
            let signature = try #require(entry.signature)
            #expect(signature.signer == cluster.deviceID(of: 0).data)      // signed by A, not by B
            #expect(entry.origin == a.internals.replica.id)
            // Check the signature independently with A's certificate.
            let identityA = try #require(try AccountStore(directory: URL(fileURLWithPath: cluster.accountDirectory(for: 0)), logger: Logger(label: "test")).loadCurrentIdentity())
            let verifier = DeviceCertificateCache(trust: identityA.account.trust)
            try verifier.admit(identityA.certificate)
            try verifier.verify(entry: entry, storeIdentifier: cluster.storeIdentifier)
            // And C's write travels back to A through B.
            c.set("from C", forKey: "back")
            try await cluster.until("A to receive C's write") { a.string(forKey: "back") == "from C" }
        }
    }

    @Test("A relay restarted while the origin is away still proves the origin's entries to a newcomer")
    func relayAfterRestart() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 3, topology: .line, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            try await cluster.waitUntilConnected()
            let (a, b, c) = (cluster[0], cluster[1], cluster[2])
            await c.stopSync()
            a.set("from A", forKey: "relayed")
            try await cluster.until("B to receive A's write") { b.string(forKey: "relayed") == "from A" }
            // A leaves; B starts afresh (as after a reboot), knowing A's certificate only from its
            // own saved data; C, which never met A, comes back.
            await a.stopSync()
            await b.stopSync()
            b.resumeSync()
            c.resumeSync()
            try await cluster.until("C to receive A's write through the restarted B") { c.string(forKey: "relayed") == "from A" }
            #expect(c.internals.replica.entries["relayed"]?.signature?.signer == cluster.deviceID(of: 0).data)
        }
    }

    @Test("Five peers write the same key at once: every replica ends with the same winner")
    func concurrentWriters() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 5, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            try await cluster.waitUntilConnected()
            for round in 0..<5 {
                await withTaskGroup(of: Void.self) { group in
                    for (i, store) in cluster.stores.enumerated() {
                        group.addTask { store.set("writer \(i) round \(round)", forKey: "contested") }
                    }
                }
            }
            try await cluster.waitUntilConverged()
            let winners = Set(cluster.stores.map { $0.string(forKey: "contested") ?? "none" })
            #expect(winners.count == 1)
            #expect(winners.first?.hasSuffix("round 4") == true)
            let entries = cluster.stores.map { $0.internals.replica.entries["contested"] }
            #expect(Set(entries.map { $0?.timestamp }).count == 1)
            #expect(Set(entries.map { $0?.origin }).count == 1)
        }
    }
}
