import Foundation
import HearthDiscovery
import HearthTestSupport
import HearthTesting
import Testing

extension AvahiTestNet {
    @Suite("Hostile TXT records")
    struct HostileTXTTests {
        @Test("services with malformed, huge or binary TXT are ignored with a log line")
        func hostileRecordsIgnored() async throws {
            let account = randomHash(), store = randomHash(), tag = String(randomHash().prefix(6))
            let good = "v=1 a=\(account) s=\(store)"
            let huge = (0..<12).map { "x\($0)=" + String(repeating: "A", count: 200) }.joined(separator: " ")
            // Each publishes with our account and store, so only validation can reject it.
            // printf turns octal escapes into raw bytes, which a Swift String argument cannot carry.
            let hostile: [(name: String, txt: String)] = [
                ("hostile-missing-\(tag)", "v=1 a=\(account)"),
                ("hostile-huge-\(tag)", "\(good) d=00000000000000d1 \(huge)"),
                ("hostile-binary-\(tag)", "\(good) \"d=$(printf '\\377\\376\\001\\002')\""),
                ("hostile-version-\(tag)", "v=99999999999999999999 a=\(account) s=\(store) d=00000000000000d3"),
                ("hostile-duplicate-\(tag)", "\(good) d=00000000000000d4 a=\(randomHash())"),
                ("hostile-nokey-\(tag)", "\(good) d=00000000000000d5 =oops"),
                ("hostile-hash-\(tag)", "v=1 a=\(account) s=\(store) d=NOT-HEX-AT-ALL"),
            ]
            let logs = LogCapture()
            let discovery = AvahiDiscovery(service: makeService("Victim-\(tag)", port: 7301, account: account, store: store),
                                           logger: logs.logger("test"))
            func logged(_ fragment: String) -> Bool { logs.all.contains { $0.message.contains(fragment) } }
            let recorder = EventRecorder(discovery)
            try await discovery.start()

            var publishers: [ChildProcess] = []
            for (name, txt) in hostile {
                publishers.append(try ChildProcess("/bin/sh", ["-c", "exec avahi-publish -s \(name) _hearth._tcp 7999 \(txt)"]))
            }
            // A name built to forge log lines: it must come out escaped, on one line.
            let evilName = "evil\nwarning forged-\(tag)\u{1b}[31m"
            publishers.append(try ChildProcess("/usr/bin/avahi-publish", ["-s", evilName, "_hearth._tcp", "7999", "v=1"]))
            // A well-formed peer published the same way must still be found: no crash, no stall.
            publishers.append(try ChildProcess("/bin/sh", ["-c", "exec avahi-publish -s fine-\(tag) _hearth._tcp 7302 \(good) d=00000000000000f1"]))
            defer { for publisher in publishers { publisher.terminate() } }

            let allLogged = await eventually(timeout: .seconds(8)) {
                hostile.allSatisfy { entry in logged("ignoring _hearth._tcp service \"\(entry.name)\"") }
            }
            let warnings = logs.all.map(\.message).filter { $0.contains("hostile-") && $0.contains(tag) }
            print("log lines for hostile services:\n" + warnings.joined(separator: "\n"))
            #expect(allLogged, "missing log lines; got:\n\(logs.all.map(\.message).joined(separator: "\n"))")
            #expect(await recorder.wait(upTo: .seconds(5)) { _ in recorder.peer(named: "fine-\(tag)") != nil } != nil)
            #expect(!recorder.all.contains { $0.peer.name.hasPrefix("hostile-") })
            #expect(logged("too large"))
            #expect(logged("binary"))
            // Its s is optional since protocol 3 (a device's service has none); its d is not.
            #expect(logged("lacks the \"d\" key"))
            #expect(logged("repeats the \"a\" key"))
            #expect(logged("malformed \"v\""))
            #expect(logged("malformed \"d\""))
            #expect(await eventually { logged("service \"evil\\nwarning forged-\(tag)\\u{1B}[31m\"") },
                    "the hostile name was not escaped in the log")
            print(logs.all.map(\.message).filter { $0.contains("evil") }.joined(separator: "\n"))
            #expect(!logged("\n"))
            #expect(discovery.isConnected)
            await discovery.stop()
        }
    }
}
