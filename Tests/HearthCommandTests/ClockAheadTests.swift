import Foundation
import HearthTestSupport
import Testing

/// Issue 11, point 13, as a user meets it: two devices each running `hearth serve`, one of them
/// with its clock two days ahead, then set right.
///
/// The wrong clock is the store's own clock skew (`HEARTH_TEST_CLOCK_SKEW_SECONDS`), which moves
/// every wall-clock reading the store and its sync engine make. libfaketime, the usual tool, cannot
/// be used: under it Swift's `Task.sleep` never wakes (tried with Debian's faketime 0.9.10, with
/// and without faking the monotonic clocks), so any Swift program hangs at its first sleep.
@Suite struct ClockAheadTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-clock-\(UUID().uuidString)").path

    /// `hearth serve` for `device` with its clock `skew` seconds off.
    static func serve(_ device: Device, skew seconds: Int) async throws -> ChildProcess {
        var environment = HearthCLI.environment
        environment["HEARTH_TEST_CLOCK_SKEW_SECONDS"] = String(seconds)
        let child = try ChildProcess(try #require(HearthCLI.binary), ["serve"] + device.store + device.directories, environment: environment)
        let listening = await child.waitForOutput("listening on port \(device.port)", inErrors: true, upTo: .seconds(30))
        try #require(listening, "serve did not start: \(child.errorOutput)")
        return child
    }

    static func count(_ text: String, in output: String) -> Int { output.components(separatedBy: text).count - 1 }

    /// The established TCP connections to either port, by the dialling end (its port, and the
    /// port it dialled), from /proc/net/tcp and tcp6: a link made again has a new dialling port.
    static func links(_ ports: Int...) -> Set<String> {
        Set(["/proc/net/tcp", "/proc/net/tcp6"].flatMap { path -> [String] in
            // Read to the end: a /proc file reports no size.
            let text = FileHandle(forReadingAtPath: path).map { String(decoding: $0.readDataToEndOfFile(), as: UTF8.self) } ?? ""
            return text.split(separator: "\n").dropFirst().compactMap { line in
                let fields = line.split(separator: " ")
                guard fields.count > 3, fields[3] == "01", let local = fields[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
                      let remote = fields[2].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
                      ports.contains(remote), !ports.contains(local) else { return nil }
                return "\(local)→\(remote)"
            }
        })
    }

    @Test("Point 13: a device 2 days ahead is told its writes are refused, the link does not loop, and once its clock is right its writes sync",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func clockTwoDaysAhead() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (laptop, kitchen) = try await Device.household(root: root)
        // Both devices dial each other, and the connection dialled by the smaller device ID is
        // kept (docs/protocol.md, "Duplicates"). So that device starts second: it dials the other
        // at once, and the first connection is the one kept. In the other order its first dial
        // finds nobody, and its retry, seconds later, replaced the connection the laptop's write
        // had gone over: the write came again on the new one, a second refusal that the check
        // for a loop below took for one (CI, once).
        let laptopFirst = try await laptop.deviceID() > kitchen.deviceID()
        let first = laptopFirst ? try await Self.serve(laptop, skew: 2 * 86_400) : try await HearthCLI.serve(kitchen)
        let second = laptopFirst ? try await HearthCLI.serve(kitchen) : try await Self.serve(laptop, skew: 2 * 86_400)
        let kitchenServe = laptopFirst ? second : first
        defer { kitchenServe.terminate() }
        var laptopServe = laptopFirst ? first : second

        // The kitchen's writes reach the laptop (its stamps are in the laptop's past).
        let fromKitchen = try await HearthCLI.run(["set", "fromKitchen", "1", "--wait", "30"] + kitchen.store + kitchen.directories)
        #expect(fromKitchen.status == 0 && fromKitchen.error.contains("confirmed by 1 peer device"), "\(fromKitchen.error)")

        // The laptop's write is refused, and hearth set says so, with the clocks, not "no peer confirmed".
        let early = try await HearthCLI.run(["set", "early", "\"from the future\"", "--wait", "30"] + laptop.store + laptop.directories)
        #expect(early.status == 1, "\(early.error)\nlaptop: \(laptopServe.errorOutput)\nkitchen: \(kitchenServe.errorOutput)")
        #expect(early.error.contains("a peer refused it: device") && early.error.contains("clockAhead"), "\(early.error)")
        #expect(early.error.contains("this device's clock is 48.0 h ahead"), "\(early.error)")
        #expect(!early.error.contains("no peer confirmed"))
        // Its serve says so at warning; hearth status shows it.
        #expect(await laptopServe.waitForOutput("the peer refused 1 entry", inErrors: true), "\(laptopServe.errorOutput)")
        let status = try await HearthCLI.run(["status"] + laptop.directories)
        #expect(status.output.contains("refused: device"), "\(status.output)")

        // No loop (before, the refused delta closed the link about four times a second, and each
        // new link brought it again): the link the refusal went over still carries the kitchen's
        // next write, and no other was made meanwhile. A loop's new link is needed for that
        // write's confirmation, so it shows by then: the write is the event, not a pause. (The
        // refusal's log line comes once a minute per peer, and a clean close logs nothing: the
        // links themselves are what is compared.)
        #expect(await kitchenServe.waitForOutput("refused 1 of 1 entries", inErrors: true))
        let refusals = Self.count("refused 1 of", in: kitchenServe.errorOutput)
        let links = Self.links(laptop.port, kitchen.port)
        let again = try await HearthCLI.run(["set", "fromKitchen", "2", "--wait", "30"] + kitchen.store + kitchen.directories)
        #expect(again.status == 0 && again.error.contains("confirmed by 1 peer device"), "\(again.error)")
        let linksAfter = Self.links(laptop.port, kitchen.port)
        #expect(!linksAfter.isEmpty && linksAfter.isSubset(of: links), "links (dialling port → port) \(links), then \(linksAfter)")
        #expect(Self.count("refused 1 of", in: kitchenServe.errorOutput) == refusals, "\(kitchenServe.errorOutput)")
        #expect(refusals <= 2, "\(kitchenServe.errorOutput)")     // one per connection, should the first be replaced after all
        #expect(Self.count("connection closed", in: kitchenServe.errorOutput) == 0, "\(kitchenServe.errorOutput)")

        // The clock is set right and serve restarted: the write made in the future is written
        // again with the right time, and arrives; new writes arrive too.
        laptopServe.terminate()
        laptopServe = try await HearthCLI.serve(laptop)
        defer { laptopServe.terminate() }
        #expect(await laptopServe.waitForOutput("entries were written", inErrors: true), "\(laptopServe.errorOutput)")
        let later = try await HearthCLI.run(["set", "later", "3", "--wait", "30"] + laptop.store + laptop.directories)
        #expect(later.status == 0 && later.error.contains("confirmed by 1 peer device"), "\(later.error)")
        let arrived = try await eventually {
            let early = try await HearthCLI.run(["get", "early"] + kitchen.store + kitchen.directories).output
            let later = try await HearthCLI.run(["get", "later"] + kitchen.store + kitchen.directories).output
            return early == "\"from the future\"\n" && later == "3\n"
        }
        #expect(arrived)
        let clear = try await HearthCLI.run(["status"] + laptop.directories)
        #expect(!clear.output.contains("refused:"), "\(clear.output)")
    }
}
