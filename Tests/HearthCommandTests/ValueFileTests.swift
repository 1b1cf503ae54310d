import Foundation
import Hearth
@testable import HearthCommand
import HearthDaemon
import HearthTestSupport
import HearthTesting
import Testing

/// Issue 11, point 11: values bigger than the shell's argument limit (128 KiB) go in with
/// `--value-file FILE` or `--value-file -`, up to the store's 1 MB, also when `serve` holds
/// the store and the write goes over its control socket.
@Suite struct ValueFileTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-valuefile-\(UUID().uuidString)").path

    @Test("Point 11: set --value-file takes a 900 KB value from a file or stdin, applied by the serve holding the store and synced",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func bigValuesFromFiles() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (laptop, kitchen) = try await Device.household(root: root)
        let serveA = try await HearthCLI.serve(laptop)
        let serveB = try await HearthCLI.serve(kitchen)
        defer { serveA.terminate(); serveB.terminate() }

        // JSON in a file: a 900 KB string with characters JSON must escape.
        var random = SplitMix64(seed: 11)
        let text = String((0..<900_000).map { _ in Character(Unicode.Scalar(UInt8.random(in: 0x20...0x7e, using: &random))) })
            .replacingOccurrences(of: "~", with: "\n")
        let json = "\(root)/value.json"
        try Data(PropertyListJSON.quote(text).utf8).write(to: URL(fileURLWithPath: json))
        let fromFile = try await HearthCLI.run(["set", "text", "--value-file", json, "--wait", "30"] + laptop.store + laptop.directories)
        #expect(fromFile.status == 0, "\(fromFile.error)")
        #expect(fromFile.error.contains("confirmed by 1 peer device (applied by the hearth process that holds the store)"), "\(fromFile.error)")
        let gotText = try await HearthCLI.run(["get", "text", "--json", "--store", "com.example.colors"] + kitchen.directories)
        #expect(gotText.output == PropertyListJSON.quote(text) + "\n", "the kitchen has \(gotText.output.utf8.count) bytes")

        // Bytes from standard input, as data: 900,000 bytes travel as 1.2 MB of base64 to the serve.
        let bytes = Data((0..<900_000).map { _ in UInt8.random(in: 0...255, using: &random) })
        let raw = "\(root)/value.bin"
        try bytes.write(to: URL(fileURLWithPath: raw))
        var environment = HearthCLI.environment
        environment["HEARTH"] = HearthCLI.binary
        let arguments = (["set", "blob", "--value-file", "-", "--as", "data", "--wait", "30"] + laptop.store + laptop.directories)
            .map { "'\($0)'" }.joined(separator: " ")
        // The store holds 1 MB in all: the text goes first.
        _ = try await HearthCLI.run(["rm", "text", "--wait", "30"] + laptop.store + laptop.directories)
        let fromStdin = try await ChildProcess.run("/bin/bash", ["-c", "\"$HEARTH\" \(arguments) < '\(raw)'"], environment: environment)
        #expect(fromStdin.status == 0, "\(fromStdin.error)")
        #expect(fromStdin.output == "blob = <900000 bytes>\n")
        let gotBytes = try await HearthCLI.run(["get", "blob", "--json", "--store", "com.example.colors"] + kitchen.directories)
        #expect(gotBytes.output == "{\"$data\":\"\(bytes.base64EncodedString())\"}\n")

        // --as string takes the text as it is, newline and all; without a holder this time.
        let plain = "\(root)/plain.txt"
        try Data("two\nlines\n".utf8).write(to: URL(fileURLWithPath: plain))
        let asString = try await HearthCLI.run(["set", "plain", "--value-file", plain, "--as", "string", "--wait", "0",
                                                "--store", "com.example.other"] + laptop.directories)
        #expect(asString.status == 0, "\(asString.error)")
        let gotPlain = try await HearthCLI.run(["get", "plain", "--json", "--store", "com.example.other"] + laptop.directories)
        #expect(gotPlain.output == "\"two\\nlines\\n\"\n")

        // Over the limit: refused here, status 5, before anything is sent to the serve.
        try Data(PropertyListJSON.quote(String(repeating: "x", count: 1_048_576)).utf8).write(to: URL(fileURLWithPath: json))
        let tooBig = try await HearthCLI.run(["set", "huge", "--value-file", json, "--wait", "0"] + laptop.store + laptop.directories)
        #expect(tooBig.status == 5, "\(tooBig.error)")
        #expect(tooBig.error.hasPrefix("hearth: key and value take 1048585 bytes; the per-value limit is 1048576"), "\(tooBig.error)")
        #expect(!serveA.errorOutput.contains("huge"))
        let misuse = try await HearthCLI.run(["set", "x", "1", "--as", "data", "--store", "s"] + laptop.directories)
        #expect(misuse.status == 2, "\(misuse.error)")
    }

    @Test("Point 11: any value the store accepts fits in one control-socket request line, whatever JSON makes of it")
    func largestRequestsFitTheSocket() throws {
        let key = String(repeating: "k", count: 64)
        let room = StoreLimits.maximumValueSize - key.utf8.count
        // The worst cases for JSON: Booleans (1 byte each, "false," in JSON), control characters
        // ("\u0001" in JSON: six times longer), dates, and data (base64). The first two do not
        // fit in the 4 MB the socket used to take.
        let worst: [PropertyListValue] = [
            .array(Array(repeating: .bool(false), count: room - 5)),
            .string(String(repeating: "\u{1}", count: room - 5)),
            .array(Array(repeating: .date(Date(timeIntervalSince1970: 1.5)), count: (room - 5) / 9)),
            .data(Data(count: room - 5)),
        ]
        for value in worst {
            let request = WriteRequest(store: "com.example.colors", key: key, value: value, wait: 3600, minimumPeers: 1024)
            try request.checkSize()
            let line = ControlRequest.write(request).line
            #expect(line.utf8.count <= ControlSocket.maximumLineBytes, "\(line.utf8.count) bytes for \(line.prefix(40))…")
        }
    }
}
