import Foundation
import Logging
import Hearth
import HearthIdentity
import HearthTestSupport
import Testing

extension AvahiTestNet {
    @Suite("One service per device")
    struct OneServicePerDeviceTests {
        @Test("a process with three synced stores publishes exactly one _hearth._tcp service, naming no store",
              .timeLimit(.minutes(1)))
        func threeStoresOneService() async throws {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-oneservice-\(UUID())").path
            defer { try? FileManager.default.removeItem(atPath: root) }
            let identity = try AccountStore(directory: URL(fileURLWithPath: "\(root)/config"), logger: Logger(label: "test"), scrypt: .testing)
                .createAccount(displayName: "One service", passphrase: "p", deviceName: "Service-\(randomHash().prefix(6))")
            let sync = SyncSettings(accountDirectory: "\(root)/config", discovery: .automatic, listenHost: "127.0.0.1")
            let configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: "\(root)/data", sync: sync)
            let stores = try ["com.example.one", "com.example.two", "com.example.three"].map {
                try UbiquitousKeyValueStore(storeIdentifier: $0, configuration: configuration)
            }
            var ports: Set<Int> = []
            for store in stores { ports.insert(try #require(try await store.syncPort())) }
            #expect(ports.count == 1, "listening on \(ports)")

            // Our services, by instance name: resolved lines carrying this device's hash.
            let device = "\"d=\(identity.deviceID.shortHash)\""
            func ours() async throws -> [[String]] {
                let result = try await ChildProcess.run("/usr/bin/avahi-browse", ["-rpt", "_hearth._tcp"])
                return result.output.split(separator: "\n").filter { $0.hasPrefix("=") }
                    .map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }
                    .filter { $0.count >= 10 && $0[9].contains(device) }
            }
            // First sighting: a browser that stays prints each resolved service as avahi-daemon
            // reports it (a line per event, read through inotify), no poll.
            let browser = try ChildProcess("/usr/bin/avahi-browse", ["-rp", "_hearth._tcp"])
            defer { browser.kill() }
            #expect(await browser.waitForOutput(device, upTo: .seconds(20)), "\(browser.output)")
            // Give a second or third publication time to show up, if there were one.
            try await Task.sleep(for: .seconds(2))
            let found = try await ours()
            for store in stores { await store.stopSync() }
            #expect(Set(found.map { $0[3] }).count == 1, "services of this device: \(found.map { $0[3] })")
            #expect(found.allSatisfy { $0[8] == "\(ports.first ?? 0)" })
            #expect(found.allSatisfy { !$0[9].contains("\"s=") }, "a store hash in \(found.map { $0[9] })")
            #expect(found.allSatisfy { $0[9].contains("\"v=4\"") }, "the sync protocol (4) in \(found.map { $0[9] })")
        }
    }
}
