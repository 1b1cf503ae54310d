import Foundation
import HearthTestSupport
import Testing

/// `hearth get` asks the process that holds the store (over its control socket) before it
/// reads the file: a serve has what it applied in memory before its file does, and its peers
/// may already have heard that it applied it (a `hearth set` elsewhere then reports it
/// confirmed, and a `get` right after must show it).
@Suite struct GetFromHolderTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-getholder-\(UUID().uuidString)").path

    @Test("hearth get prints what the serve holding the store has in memory, even when the file cannot be read",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func getAsksTheHolder() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (laptop, _) = try await Device.household(root: root)
        let set = try await HearthCLI.run(["set", "colour", "--string", "blue", "--wait", "0"] + laptop.store + laptop.directories)
        #expect(set.status == 0, "\(set.error)")
        let serve = try await HearthCLI.serve(laptop)
        defer { serve.terminate() }
        // The file, damaged under the serve (which has read it): only the holder can answer now.
        let files = FileManager.default.enumerator(atPath: laptop.data)?.compactMap { $0 as? String } ?? []
        let file = try #require(files.first { $0.hasSuffix("com.example.colors.plist") }, "no store file among \(files)")
        try Data("not a property list".utf8).write(to: URL(fileURLWithPath: "\(laptop.data)/\(file)"))

        let got = try await HearthCLI.run(["get", "colour", "--store", "com.example.colors"] + laptop.directories)
        #expect(got.status == 0, "\(got.error)")
        #expect(got.output == "\"blue\"\n")   // as `hearth get` prints a string
        let json = try await HearthCLI.run(["get", "colour", "--json", "--store", "com.example.colors"] + laptop.directories)
        #expect(json.output == "\"blue\"\n")
        let missing = try await HearthCLI.run(["get", "nothing", "--store", "com.example.colors"] + laptop.directories)
        #expect(missing.status == 7, "\(missing.error)")
        #expect(missing.error.contains("no value for nothing"))
    }
}
