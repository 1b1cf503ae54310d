import Foundation
import Logging
import HearthDiscovery
import HearthTestSupport
import Testing

extension AvahiTestNet {
    @Suite("avahi-browse lists Hearth services")
    struct AvahiBrowseTests {
        @Test("avahi-browse -rpt _hearth._tcp shows the service with its TXT fields")
        func avahiBrowseSeesTXT() async throws {
            let service = makeService("Browse-me-\(randomHash().prefix(6))", port: 7201)
            let discovery = AvahiDiscovery(service: service, logger: Logger(label: "test"))
            try await discovery.start()
            #expect(await eventually { discovery.publishedName != nil })

            // -r resolve, -p parsable, -t terminate after the cache is dumped.
            let result = try await ChildProcess.run("/usr/bin/avahi-browse", ["-rpt", "_hearth._tcp"])
            await discovery.stop()
            #expect(result.status == 0, "avahi-browse failed: \(result.error)")
            // Parsable lines: =;iface;proto;name;type;domain;host;address;port;"txt" "txt"…
            let resolved = result.output.split(separator: "\n").filter { $0.hasPrefix("=") }
                .map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }
            let mine = try #require(resolved.first { $0.count >= 10 && $0[3] == service.instanceName.replacingOccurrences(of: "-", with: "-") },
                                    "not listed by avahi-browse:\n\(result.output)")
            #expect(mine[4] == "_hearth._tcp")
            // The host's loopback address; Avahi sometimes resolves it over IPv6 first on lo.
            #expect(["127.0.0.1", "::1"].contains(mine[7]), "\(mine)")
            #expect(mine[8] == "7201")
            let txt = mine[9]
            for field in ["\"v=1\"", "\"a=\(service.accountHash)\"", "\"s=\(service.storeHash ?? "")\"", "\"d=\(service.deviceHash)\""] {
                #expect(txt.contains(field), "TXT \(txt) lacks \(field)")
            }
        }
    }
}
