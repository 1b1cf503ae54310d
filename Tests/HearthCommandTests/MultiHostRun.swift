import Foundation
import HearthTestSupport
import Testing

/// A script run on N virtual hosts by scripts/testnet/multihost.sh (each host its own network
/// namespace, /run, D-Bus and avahi-daemon), and the `check NAME VALUE` lines it printed, by host.
struct MultiHostRun {
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    let output: String
    let status: Int32?
    private let lines: [String]

    /// Runs `scripts/testnet/SCRIPT SHARED ARGUMENTS…` on `hosts` IPv4-only hosts; SHARED is a
    /// fresh folder every host sees, removed afterwards.
    static func run(hosts: Int, script: String, arguments: [String], timeout: Duration = .seconds(200)) async throws -> MultiHostRun {
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-mh-\(script)-\(UUID())").path
        // Open to all: this test runs as root (it builds namespaces), the hosts' commands as the
        // unprivileged test user (multihost.sh drops to it), and they write here.
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: shared)   // past the umask
        defer { try? FileManager.default.removeItem(atPath: shared) }
        let result = try await ChildProcess.run(
            "\(repositoryRoot)/scripts/testnet/multihost.sh",
            ["-n", String(hosts), "-4", "--", "\(repositoryRoot)/scripts/testnet/\(script)", shared] + arguments,
            environment: HearthCLI.environment, timeout: timeout)
        print(result.output)
        #expect(result.status == 0, "multihost.sh failed:\n\(result.output)\n\(result.error)")
        return MultiHostRun(output: result.output, status: result.status, lines: result.output.split(separator: "\n").map(String.init))
    }

    /// What host `host` printed after `check NAME `, if it did.
    func check(_ host: Int, _ name: String) -> String? {
        let prefix = "[h\(host)] check \(name) "
        return lines.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }
}
