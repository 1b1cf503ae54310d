import Foundation
import Hearth
import HearthTestSupport
import HearthTesting
import Testing

@Suite("Clock skew")
struct ClockSkewTests {
    @Test("B's clock an hour behind A's: B applies A's write, writes the key, and B's write wins everywhere")
    func hourBehind() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout, clockSkews: [.zero, .seconds(-3600)]) { cluster in
            let (a, b) = (cluster[0], cluster[1])
            try await cluster.waitUntilConnected()
            a.set("A's value", forKey: "k")
            try await cluster.until("B to apply A's write") { b.string(forKey: "k") == "A's value" }
            b.set("B's later value", forKey: "k")
            try await cluster.waitUntilConverged(expected: ["k": "B's later value"])
            #expect(a.string(forKey: "k") == "B's later value")
            #expect(b.internals.replica.entries["k"]!.timestamp > a.internals.replica.entries["k"]!.timestamp.predecessorForTest)
        }
    }

    @Test("A peer whose clock is a year ahead cannot pin a key: its writes are refused")
    func yearAhead() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 3, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout, clockSkews: [.zero, .zero, .seconds(365 * 86_400)]) { cluster in
            let (a, b, future) = (cluster[0], cluster[1], cluster[2])
            try await cluster.until("A and B to connect") { a.connectedPeerCount >= 1 && b.connectedPeerCount >= 1 }
            future.set("from the future", forKey: "k")
            // Awaited, not slept: both peers have answered the write (a refusal counts as an answer).
            #expect(await future.waitUntilSynced(peers: 2, timeout: .seconds(30)))
            #expect(a.string(forKey: "k") == nil)
            #expect(b.string(forKey: "k") == nil)
            a.set("present", forKey: "k")
            try await cluster.waitUntilConverged([0, 1], expected: ["k": "present"])
        }
    }
}

extension HLCTimestamp {
    /// The timestamp just before this one (for strict comparisons in tests).
    var predecessorForTest: HLCTimestamp { HLCTimestamp(rawValue: rawValue &- 1) }
}

import HearthCore
