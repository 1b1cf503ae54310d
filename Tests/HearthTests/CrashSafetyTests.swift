import Foundation
import Logging
import Hearth
import HearthCore
import HearthTestSupport
import Testing

/// Persistence seen from outside the process: restarts, SIGKILL, a second process.
@Suite("Persistence and crash safety", .serialized)
struct CrashSafetyTests {
    @Test("A restarted process sees every value, even without synchronize(): write-behind flushes at exit")
    func reopen() async throws {
        let t = try TemporaryStore(identifier: "reopen")
        t.cleanUp()
        let dir = t.directory
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (_, status) = try await TestWriter.run(["put", dir, "child-store", "colour=blue", "size=large", "é=ü"])
        #expect(status == 0)
        let store = try UbiquitousKeyValueStore(storeIdentifier: "child-store", configuration: .init(dataDirectory: dir))
        #expect(store.string(forKey: "colour") == "blue")
        #expect(store.string(forKey: "size") == "large")
        #expect(store.string(forKey: "é") == "ü")
    }

    @Test("Changes reach disk within about a second without synchronize()")
    func writeBehind() async throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        t.store.set("soon", forKey: "k")
        // Checked as the folder changes (inotify), within the 3 s this allows.
        var onDisk: PropertyListValue?
        try await untilFilesChange([t.directory], deadline: .seconds(3)) {
            if let data = FileManager.default.contents(atPath: t.location.filePath) {
                onDisk = try ReplicaFile.decode(data, path: t.location.filePath).replica.value(forKey: "k")
            }
            return onDisk != nil
        }
        #expect(onDisk == "soon")
    }

    @Test("SIGKILL at 50 random moments: the file always loads and holds what synchronize() confirmed")
    func killLoop() async throws {
        let t = try TemporaryStore(identifier: "unused")
        let dir = t.directory
        defer { t.cleanUp() }
        var rng = SystemRandomNumberGenerator()
        let location = StoreLocation(dataDirectory: dir, storeIdentifier: "crash")
        var highestConfirmed: Int64 = 0
        var roundsWithConfirmation = 0
        for round in 1...50 {
            let writer = try TestWriter.start(["loop", dir, "crash"])
            // Kill it at a random moment once it is writing and confirming (on a busy machine the
            // start alone can take longer than any fixed delay): after a random number of further
            // confirmations, 0 to 20, each seen as its line is written (inotify), not after a timer.
            _ = await writer.waitForOutput("confirmed ")
            let more = Int.random(in: 0...20, using: &rng)
            let first = writer.output.split(separator: "\n").filter { $0.hasPrefix("confirmed ") }.count
            await untilFilesChange([writer.outputFile], deadline: .seconds(30)) {
                writer.output.split(separator: "\n").filter { $0.hasPrefix("confirmed ") }.count >= first + more || !writer.isRunning
            }
            writer.kill()
            let lines = writer.output.split(separator: "\n").filter { $0.hasPrefix("confirmed ") }
            let confirmed = lines.compactMap { Int64($0.dropFirst("confirmed ".count)) }.max() ?? 0
            highestConfirmed = max(highestConfirmed, confirmed)
            if confirmed > 0 { roundsWithConfirmation += 1 }

            let storage = try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 })
            switch try storage.load() {
            case .fresh:
                #expect(highestConfirmed == 0, "round \(round): file missing after a confirmed write")
            case .recovered(let error, _):
                Issue.record("round \(round): file damaged after SIGKILL: \(error)")
            case .loadedSettingAside(_, let setAside, _):
                Issue.record("round \(round): entries set aside after SIGKILL: \(setAside)")
            case .loaded(let replica):
                let counter = replica.value(forKey: "counter")?.integerValue ?? 0
                // Each round continues from the previous state, so the counter restarts at 1
                // but the confirmed value of this round must be on disk.
                #expect(counter >= confirmed, "round \(round): confirmed \(confirmed) but the file holds \(counter)")
            }
        }
        // The kills must land while writes are confirmed, or the test proves nothing.
        #expect(roundsWithConfirmation == 50, "only \(roundsWithConfirmation) of 50 rounds confirmed a write")
    }

    @Test("With .embedded, a second process opening the same store gets a clear error")
    func secondProcess() async throws {
        let t = try TemporaryStore(identifier: "locked")
        defer { t.cleanUp() }
        let (output, status) = try await TestWriter.run(["hold", t.directory, "locked"], environment: ["HEARTH_TEST_ATTACH": "embedded"])
        #expect(status == 1)
        #expect(output.hasPrefix("error storeLocked:"))
        #expect(output.contains("in use by another process"))
        #expect(output.contains("\(getpid())"))
    }

    @Test("While another process holds the store, this one's throwing init with .embedded says so")
    func heldByChild() async throws {
        let t = try TemporaryStore(identifier: "unused")
        defer { t.cleanUp() }
        let child = try TestWriter.start(["hold", t.directory, "held"])
        defer { child.kill() }
        #expect(await child.waitForOutput("opened"), "\(child.output)")
        var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: t.directory, sync: .disabled)
        configuration.attach = .embedded
        do {
            _ = try UbiquitousKeyValueStore(storeIdentifier: "held", configuration: configuration)
            Issue.record("opened a store another process holds")
        } catch {
            #expect(error.code == .storeLocked)
            #expect(error.reason.contains("\(child.pid)"))
        }
    }

    @Test("A damaged store file is moved aside and reported; the store starts empty")
    func damagedFile() throws {
        let t = try TemporaryStore(identifier: "unused")
        defer { t.cleanUp() }
        let location = StoreLocation(dataDirectory: t.directory, storeIdentifier: "damaged")
        try FileManager.default.createDirectory(atPath: location.directory, withIntermediateDirectories: true)
        let garbage = Data("bplist00 but then nonsense".utf8)
        try garbage.write(to: URL(fileURLWithPath: location.filePath))
        let store = try UbiquitousKeyValueStore(storeIdentifier: "damaged", configuration: .init(dataDirectory: t.directory))
        #expect(store.dictionaryRepresentation.isEmpty)
        let aside = try FileManager.default.contentsOfDirectory(atPath: location.directory).filter { $0.contains(".damaged-") }
        #expect(aside.count == 1)
        #expect(FileManager.default.contents(atPath: location.directory + "/" + aside[0]) == garbage)
        store.set("fresh", forKey: "k")
        #expect(store.synchronize())
    }
}
