import Foundation
import HearthTestSupport
import Testing

extension AvahiTestNet {
    @Suite("Three virtual hosts")
    struct MultiHostTests {
        @Test("three hosts on a virtual bridge discover one another (IPv4 and IPv6 link-local)",
              .enabled(if: TestNet.isRoot, "building host namespaces needs root"),
              .timeLimit(.minutes(1)))
        func threeHostsDiscoverEachOther() async throws {
            let probe = try #require(TestNet.probePath, "hearth-discovery-probe not built (swift build --build-tests)")
            let result = try await ChildProcess.run(
                TestNet.script("multihost.sh"),
                ["-n", "3", "--", probe, "--expect", "2", "--addresses", "2", "--timeout", "20", "--together",
                 "--account", "0123456789abcdef", "--store", "fedcba9876543210"],
                timeout: .seconds(55))
            print(result.output)
            #expect(result.status == 0, "multihost.sh failed:\n\(result.output)\n\(result.error)")
            for host in 1...3 {
                let lines = result.output.split(separator: "\n").filter { $0.hasPrefix("[h\(host)] ") }
                let others = (1...3).filter { $0 != host }
                for other in others {
                    // Over IPv4 or IPv6 first, whichever resolves first; the other family follows as an update.
                    #expect(lines.contains { $0.contains("appeared probe_on_h\(other) 7420 ") }, "h\(host) did not see h\(other)")
                    #expect(lines.contains { $0.contains("probe_on_h\(other) 7420 169.254.77.\(other)") },
                            "h\(host) never got h\(other)'s IPv4 address")
                }
                #expect(!lines.contains { $0.contains("appeared probe_on_h\(host) ") }, "h\(host) reported itself")
                #expect(lines.contains("[h\(host)] exit 0"))
            }
            // IPv6 link-local addresses come with their interface scope.
            #expect(result.output.contains("%eth0]"))
        }
    
        @Test("a host on two links is one peer carrying an address on each interface",
              .enabled(if: TestNet.isRoot, "building host namespaces needs root"),
              .timeLimit(.minutes(1)))
        func severalInterfaces() async throws {
            let probe = try #require(TestNet.probePath, "hearth-discovery-probe not built (swift build --build-tests)")
            let result = try await ChildProcess.run(
                TestNet.script("multihost.sh"),
                ["-n", "2", "-l", "2", "-4", "--", probe, "--expect", "1", "--addresses", "2", "--timeout", "20", "--together"],
                timeout: .seconds(55))
            print(result.output)
            #expect(result.status == 0, "multihost.sh failed:\n\(result.output)\n\(result.error)")
            for (host, other) in [(1, 2), (2, 1)] {
                #expect(result.output.split(separator: "\n").contains {
                    $0.hasPrefix("[h\(host)] ") && $0.contains("probe_on_h\(other) 7420 169.254.77.\(other) 169.254.78.\(other)")
                }, "h\(host) did not fold h\(other)'s two interfaces into one peer")
            }
        }
}
}
