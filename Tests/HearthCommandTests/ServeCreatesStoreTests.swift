import Foundation
import Hearth
import HearthTestSupport
import HearthTesting
import Testing

/// Issue 11, point 10: `serve --help` says it creates the store; so does `watch --create`.
/// With no peer to bring anything, the store must exist all the same.
@Suite struct ServeCreatesStoreTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-create-\(UUID().uuidString)").path

    @Test("Point 10: hearth serve and watch --create create the store's file at start, with no peer reachable",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"),
          arguments: [["serve"], ["watch", "--create"]])
    func serveCreatesTheStore(_ subcommand: [String]) async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let solo = try await Device.alone(root: root)
        let list = ["list", "--json", "--store", "com.example.colors"] + solo.directories
        let before = try await HearthCLI.run(list)
        #expect(before.status == 4, "the store existed before: \(before.output)")

        let process = try await HearthCLI.serve(solo, subcommand)
        let during = try await HearthCLI.run(list)
        #expect(during.status == 0, "\(during.error)")
        #expect(during.output == "{}\n")

        process.send(SIGTERM)
        #expect(await process.wait(upTo: .seconds(15)) == 0, "\(process.errorOutput)")
        let after = try await HearthCLI.run(list)
        #expect(after.status == 0, "\(after.error)")
        let help = try await HearthCLI.run(["serve", "--help"])
        #expect(help.output.contains("Creates the store on this device if needed"))
    }
}
