import Foundation
@testable import HearthCommand
import HearthDaemon
import HearthTestSupport
import Testing

/// Issue 11, point 6: the figures `hearth set` and `hearth status` give are the true ones.
@Suite struct DeliveryFiguresTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-figures-\(UUID().uuidString)").path

    @Test("Point 6: set --min-peers 2 with one peer confirming reports 1 confirmed of 2 required",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func minPeersCountsWhoConfirmed() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (laptop, kitchen) = try await Device.household(root: root)
        let serve = try await HearthCLI.serve(kitchen)
        defer { serve.terminate() }

        // One peer confirms at once; the second never exists, so the wait runs out.
        let set = try await HearthCLI.run(["set", "color", "2", "--min-peers", "2", "--wait", "3", "--json"] + laptop.store + laptop.directories)
        #expect(set.status == 0, "\(set.error)")
        #expect(set.output.contains("\"synced\":false,\"peers\":1,\"required\":2"), "\(set.output)")
        let text = try await HearthCLI.run(["set", "color", "3", "--min-peers", "2", "--wait", "1"] + laptop.store + laptop.directories)
        #expect(text.error.contains("saved on this device; 1 of the 2 required peer devices confirmed it in time"), "\(text.error)")

        let enough = try await HearthCLI.run(["set", "color", "4", "--wait", "30", "--json"] + laptop.store + laptop.directories)
        #expect(enough.output.contains("\"synced\":true,\"peers\":1,\"required\":1"), "\(enough.output) \(enough.error)")
    }

    @Test("Point 6: hearth status reports what the process holding the store knows (nothing pending once the peer has it)",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func statusAsksTheHolder() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (laptop, kitchen) = try await Device.household(root: root)
        let serveA = try await HearthCLI.serve(laptop)
        let serveB = try await HearthCLI.serve(kitchen)
        defer { serveA.terminate(); serveB.terminate() }
        // Written on one device and removed on the other: the laptop's last save comes before
        // the kitchen's acknowledgement of the removal, so its file keeps one entry pending.
        for i in 1...3 {
            let set = try await HearthCLI.run(["set", "k\(i)", "\(i)", "--wait", "30"] + laptop.store + laptop.directories)
            #expect(set.error.contains("confirmed by 1 peer device"), "\(set.error)")
            let removed = try await HearthCLI.run(["rm", "k\(i)", "--wait", "30"] + kitchen.store + kitchen.directories)
            #expect(removed.error.contains("confirmed by 1 peer device"), "\(removed.error)")
        }

        var status = ""
        let settled = try await eventually {
            status = try await HearthCLI.run(["status", "--json"] + laptop.directories).output
            return status.contains("\"pending\":0,\"knownPeers\":1,")
        }
        #expect(settled, "status said: \(status)")
        #expect(status.contains("\"heldBy\":\(serveA.pid)"), "status said: \(status)")
        let text = try await HearthCLI.run(["status"] + laptop.directories).output
        #expect(text.contains("pending: 0 entries not yet confirmed by every known peer (1 known)"), "\(text)")
    }

    @Test("Point 6: the control socket takes every number as an integer or a double (\"wait\": 1 is one second)")
    func controlNumbersTakeIntegersAndDoubles() throws {
        let id = UUID().uuidString
        for (wait, minPeers) in [("1", "2"), ("1.0", "2.0"), ("1", "2.0"), ("1.0", "2")] {
            let line = "{\"op\":\"set\",\"id\":\"\(id)\",\"store\":\"s\",\"key\":\"k\",\"value\":7,\"wait\":\(wait),\"minPeers\":\(minPeers)}"
            guard case .write(let request) = try ControlRequest(line: line) else {
                Issue.record("not a write: \(line)")
                continue
            }
            #expect(request.wait == 1, "\(line)")
            #expect(request.minimumPeers == 2, "\(line)")
            #expect(request.value == .integer(7))
        }
        // A status reply's counters, written either way, read the same.
        let reply = try ControlRequest.fields(ofReply: "{\"status\":0,\"pid\":12.0,\"store\":\"s\",\"connectedPeers\":[],\"pending\":3,\"keys\":4.0}")
        let live = try LiveStatus(reply)
        #expect(live.pid == 12)
        #expect(live.figures.pending == 3)
        #expect(live.figures.keys == 4)
    }
}
