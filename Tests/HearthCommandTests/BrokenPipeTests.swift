import Foundation
import HearthTestSupport
import Testing

/// Issue 11, point 5: `hearth` whose output is closed (`| head -n 1`) exits quietly, as Unix
/// tools do, instead of trapping in FileHandle.write with a backtrace.
@Suite struct BrokenPipeTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-pipe-\(UUID().uuidString)").path

    /// Starts a bash script with `$HEARTH` set to the built command.
    static func bash(_ script: String) throws -> ChildProcess {
        var environment = HearthCLI.environment
        environment["HEARTH"] = HearthCLI.binary
        return try ChildProcess("/bin/bash", ["-c", script], environment: environment)
    }

    /// Runs a bash script to its end; returns its output.
    static func pipeline(_ script: String) async throws -> String {
        let child = try bash(script)
        #expect(await child.wait(upTo: .seconds(60)) == 0, "\(script): \(child.errorOutput)")
        return child.output
    }

    static func expectQuiet(_ errors: String, _ comment: Comment? = nil) {
        #expect(!errors.contains("Fatal error"), comment)
        #expect(!errors.contains("Broken pipe"), comment)
        #expect(!errors.contains("Backtrac"), comment)
        #expect(!errors.contains("hearth: "), comment)
    }

    @Test("Point 5: hearth watch | head -n 1 stops as on SIGTERM (saves, exits 0) and prints no error",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func watchIntoHead() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (laptop, kitchen) = try await Device.household(root: root)
        let errors = "\(root)/watch.err"
        let arguments = (["watch", "--create"] + kitchen.store + kitchen.directories).map { "'\($0)'" }.joined(separator: " ")
        // head takes the first change and goes; the changes after it meet a closed pipe.
        let piped = try Self.bash("\"$HEARTH\" \(arguments) 2>'\(errors)' | head -n 1; echo \"watch exited ${PIPESTATUS[0]}\"")
        defer { piped.terminate() }
        var sets = 0
        let watchEnded = try await eventually(timeout: .seconds(60)) {
            guard piped.isRunning else { return true }
            guard let log = try? String(contentsOfFile: errors, encoding: .utf8), log.contains("listening on port") else { return false }
            sets += 1
            _ = try await HearthCLI.run(["set", "n\(sets)", "--int", "\(sets)", "--wait", "5"] + laptop.store + laptop.directories)
            return false
        }
        #expect(watchEnded, "watch still runs after \(sets) sets")
        #expect(piped.output.hasPrefix("initialSyncChange (1): n1 = 1\n"), "\(piped.output)")
        #expect(piped.output.contains("watch exited 0"), "\(piped.output)")
        let log = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        Self.expectQuiet(log, "watch's stderr: \(log)")
        // It saved what it received before it stopped.
        let listed = try await HearthCLI.run(["list", "--json", "--store", "com.example.colors"] + kitchen.directories)
        #expect(listed.output.contains("\"n1\":1"), "\(listed.output) \(listed.error)")
    }

    @Test("Point 5: one-shot commands whose output is closed finish their work and exit with their usual status",
          .enabled(if: HearthCLI.binary != nil, "the hearth executable is not built next to the tests"))
    func oneShotIntoClosedPipe() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (laptop, _) = try await Device.household(root: root)
        let store = "'--store' 'com.example.notes' " + laptop.directories.map { "'\($0)'" }.joined(separator: " ")
        // 100,000 bytes of output fill the pipe (64 KiB), so the write meets the closed pipe
        // whatever the timing: head -c 10 takes ten bytes and goes.
        let big = String(repeating: "x", count: 100_000)
        let set = try await Self.pipeline("\"$HEARTH\" set big --string \(big) --wait 0 \(store) 2>'\(root)/set.err' | head -c 10; "
                                          + "echo; echo \"set exited ${PIPESTATUS[0]}\"")
        #expect(set.hasPrefix("big = \"xxx"), "\(set)")
        #expect(set.contains("set exited 0"), "\(set)")
        Self.expectQuiet((try? String(contentsOfFile: "\(root)/set.err", encoding: .utf8)) ?? "")
        let got = try await HearthCLI.run(["get", "big", "--store", "com.example.notes"] + laptop.directories)
        #expect(got.output.count == 100_003, "the set did its work")

        // And a reader that never reads at all; list would die of SIGPIPE (status 141) without the fix.
        for command in ["list", "get big", "status"] {
            let closed = try await Self.pipeline("\"$HEARTH\" \(command) \(command == "status" ? laptop.directories.map { "'\($0)'" }.joined(separator: " ") : store) "
                                                 + "2>'\(root)/c.err' | head -c 1 >/dev/null; echo \"exited ${PIPESTATUS[0]}\"")
            #expect(closed.contains("exited 0"), "\(command): \(closed)")
            Self.expectQuiet((try? String(contentsOfFile: "\(root)/c.err", encoding: .utf8)) ?? "", "\(command)")
        }
    }
}
