import Foundation
import Hearth
import HearthCore
import HearthIdentity
import HearthSync
import HearthTestSupport
import HearthTesting
import Testing

/// Relays, direct first (docs/protocol.md, "Relays"): in a mesh each change crosses its
/// writer's links only; what a relay leaves to a link reaches the peer anyway once that link
/// is gone.
@Suite("Relays, direct first")
struct DirectFirstRelayTests {
    /// Waits until every one of `count` devices has heard, from each of its peers, links that
    /// name all `count` − 2 other devices: from then on nobody relays a writer's own writes.
    static func waitForFullLinks(_ capture: LogCapture, devices count: Int, on cluster: LoopbackCluster) async throws {
        try await cluster.until("every device to hear its peers' full links") {
            var heard = Set<String>()
            for record in capture.all where record.message == "the peer's links" {
                let links = record.metadata["links"].map { $0.split(separator: ",") } ?? []
                if links.count == count - 2 { heard.insert("\(record.metadata["device"] ?? "") \(record.metadata["peer"] ?? "")") }
            }
            return heard.count == count * (count - 1)
        }
    }

    @Test("In a full mesh of 5, a change crosses its writer's 4 links, not all 20 directed links")
    func meshCarriesEachChangeOnce() async throws {
        let capture = LogCapture()
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 5, linkTimeout: UnderLoad.linkTimeout, connectTimeout: UnderLoad.connectTimeout,
                                      logger: capture.logger("hearth")) { cluster in
            try await cluster.waitUntilConnected()
            try await Self.waitForFullLinks(capture, devices: 5, on: cluster)
            // Each link's first delta of the store is whole: a first round makes them.
            try cluster.write("warm", forKey: "warm", on: 0)
            try await cluster.waitUntilConverged()
            let sent = { cluster.stores.map { $0.syncMetrics?.entriesSent ?? 0 }.reduce(0, +) }
            let before = sent()
            let changes = 20
            var expected: [String: PropertyListValue] = ["warm": "warm"]
            for i in 0..<changes {
                // Every device writes in turn; each change is awaited everywhere before the next.
                try cluster.write(.integer(Int64(i)), forKey: "k\(i)", on: i % 5)
                expected["k\(i)"] = .integer(Int64(i))
                try await cluster.waitUntilConverged(expected: expected)
            }
            let carried = sent() - before
            // Before direct first, every receiver relayed to the 3 others: 4 + 4 × 3 = 16 a change.
            #expect(carried <= changes * 4 * 3 / 2, "\(carried) entries carried for \(changes) changes")
            #expect(carried >= changes * 4)
        }
    }

    @Test("A writer that dies after pushing to B but not to C: B holds back from C until C's link to the writer is gone, then relays")
    func writerDiesMidPush() async throws {
        let capture = LogCapture()
        let network = InMemoryNetwork()
        try await withLoopbackCluster(network: network, replicas: 2, linkTimeout: UnderLoad.linkTimeout, connectTimeout: UnderLoad.connectTimeout,
                                      logger: capture.logger("hearth")) { cluster in
            try await cluster.waitUntilConnected()
            let (b, c) = (cluster[0], cluster[1])
            let shortB = String(cluster.deviceIDs[0].prefix(8)), shortC = String(cluster.deviceIDs[1].prefix(8))
            // Both devices dial each other: a dialler that found the other's listener not up yet
            // retries, and its connection may replace the first one later (the duplicate rule),
            // with a new, whole first delta. Wait until each has dialled once and one link is left.
            try await cluster.until("B and C to have each dialled the other once") { network.linksMade == 2 && network.linksInUse == 2 }
            try await cluster.waitUntilConnected()
            // The writer: a member of the account speaking the frames by hand, linked to B and C.
            let writer = try HostilePeer(joining: cluster, name: "writer")
            let toB = try await writer.connect(port: cluster.ports[0])
            let toC = try await writer.connect(port: cluster.ports[1])
            try toB.send(try writer.greeting())
            try toC.send(try writer.greeting())
            // B must know that C has a session with the writer before the writer writes.
            try await cluster.until("B to hear C's links naming the writer") {
                capture.all.contains { record in
                    record.message == "the peer's links" && record.metadata["device"] == shortB
                        && record.metadata["peer"]?.contains(shortC) == true
                        && record.metadata["links"]?.contains(writer.identity.deviceID.short) == true
                }
            }
            let sessions = b.syncMetrics?.sessions
            // The writer pushes to B, then dies before pushing to C.
            try toB.send(writer.delta([try writer.entry("mid-push", "written", origin: writer.origin(), sequence: 1)]))
            try await cluster.until("B to apply the writer's entry") { b.string(forKey: "mid-push") == "written" }
            // Direct first: B leaves the writer's own write to the writer's link to C. B's own
            // write after it goes to C in a delta of all C lacks from B, less what is left to the
            // writer's link: once C holds it, B has had its chance to relay the writer's.
            b.set("after", forKey: "marker")
            try await cluster.until("C to receive B's write made after the writer's") { c.string(forKey: "marker") == "after" }
            // (Unless B and C made a new connection meanwhile: its first delta is whole, by design.)
            if b.syncMetrics?.sessions == sessions {
                #expect(c.string(forKey: "mid-push") == nil, "B relayed although C is linked to the writer")
            }
            await toC.close()
            await toB.close()
            // C's link to the writer is gone: C tells B, and B sends what it left to that link.
            try await cluster.until("C to receive the writer's entry through B") { c.string(forKey: "mid-push") == "written" }
            #expect(c.internals.replica.entries["mid-push"]?.signature?.signer == writer.identity.deviceID.data)
        }
    }
}
