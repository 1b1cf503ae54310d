import Foundation
@testable import Hearth
import HearthCore
import HearthTesting
import HearthTestSupport
import Logging
import Testing

/// Issue 27, point 4 (persistence behind an interface a simulation can replace): a store on
/// HearthTesting's `SimulatedDisk`, crashed before its writes were durable and opened again,
/// holds exactly what was durable; what `synchronize()` reported durable is never what a crash
/// loses; an injected disk failure is reported (a `false` and an error line) and loses nothing
/// that was durable. In memory and from a seed: no files, no sleeps, no timer (the devices'
/// delayed saves are handed to the test, which runs them or not, so only what it runs and
/// `synchronize()` save).
@Suite("A store on a simulated disk")
struct SimulatedDiskTests {
    static let storeIdentifier = "com.example.disk"
    static let dataDirectory = "/sim/device"

    /// One device on `disk`, as a machine that boots; its stores log to `capture`.
    struct Machine {
        let disk: SimulatedDisk
        let capture = LogCapture()
        var device: HearthDevice
        var store: UbiquitousKeyValueStore

        init(disk: SimulatedDisk) throws {
            self.disk = disk
            (device, store) = try Self.boot(disk, logger: capture.logger("hearth"))
        }

        static func boot(_ disk: SimulatedDisk, logger: Logger) throws -> (HearthDevice, UbiquitousKeyValueStore) {
            var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: SimulatedDiskTests.dataDirectory,
                                                                      writeBehindDelay: .seconds(3600), sync: .disabled, logger: logger)
            configuration.attach = .embedded
            // Delayed saves (write-behind, retries) never run: only synchronize() saves.
            let device = try disk.device(configuration) { _, _ in }
            return (device, try device.store(SimulatedDiskTests.storeIdentifier))
        }

        /// Power cut and reboot: the old device's objects find the disk gone (their last saves
        /// fail), then a new device opens the store from what was durable.
        mutating func crashAndReboot() async throws {
            disk.crash()
            await device.stop()
            disk.restart()
            (device, store) = try Self.boot(disk, logger: capture.logger("hearth"))
        }

        var values: [String: PropertyListValue] {
            Dictionary(uniqueKeysWithValues: store.backend.visibleValues.map { ($0.key.string, $0.value) })
        }
    }

    @Test("A crash before durability loses the writes since, and only those")
    func crashKeepsOnlyDurableState() async throws {
        var machine = try Machine(disk: SimulatedDisk(seed: 1))
        machine.store.set("durable", forKey: "a")
        machine.store.set(Int64(1), forKey: "b")
        #expect(machine.store.synchronize())
        machine.store.set("lost", forKey: "a")
        machine.store.set(Int64(2), forKey: "c")
        machine.store.removeObject(forKey: "b")
        #expect(machine.values == ["a": "lost", "c": 2])
        try await machine.crashAndReboot()
        #expect(machine.values == ["a": "durable", "b": 1])
        // And the reopened store saves again.
        machine.store.set("after", forKey: "a")
        #expect(machine.store.synchronize())
        try await machine.crashAndReboot()
        #expect(machine.values == ["a": "after", "b": 1])
        await machine.device.stop()
    }

    @Test("What synchronize() reports durable survives every crash, with disk failures drawn from a seed",
          arguments: [UInt64(1), 2, 3, 27])
    func reportedDurabilityHolds(seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        let disk = SimulatedDisk(seed: seed, faults: .init(write: 0.15, sync: 0.15))
        var machine = try Machine(disk: disk)
        // The store's contents when a save last reported them durable.
        var claimed: [String: PropertyListValue] = [:]
        var claims = 0, refusals = 0, crashes = 0
        for step in 0..<400 {
            switch random.next() % 10 {
            case 0...4:
                machine.store.set(Int64(step), forKey: "k\(random.next() % 8)")
            case 5:
                machine.store.removeObject(forKey: "k\(random.next() % 8)")
            case 6...8:
                if machine.store.synchronize() {
                    claims += 1
                    claimed = machine.values
                } else {
                    refusals += 1
                }
            default:
                crashes += 1
                try await machine.crashAndReboot()
                let reopened = machine.values
                // Exactly the state the last successful synchronize() reported durable.
                #expect(reopened == claimed, "seed \(seed), step \(step): reopened \(reopened), last reported durable \(claimed)")
            }
        }
        // The run exercised what it claims to: saves that succeeded and failed, and crashes.
        #expect(claims > 10 && refusals > 5 && crashes > 10 && disk.injectedFailures == refusals,
                "claims \(claims), refusals \(refusals), crashes \(crashes), failures \(disk.injectedFailures)")
        await machine.device.stop()
    }

    @Test("A failed write is reported, leaves no temporary file, and loses nothing durable",
          arguments: [SimulatedDisk.Operation.write, .sync, .rename, .syncDirectory])
    func injectedFailure(operation: SimulatedDisk.Operation) async throws {
        var machine = try Machine(disk: SimulatedDisk())
        machine.store.set("kept", forKey: "a")
        #expect(machine.store.synchronize())
        let file = try #require(machine.store.fileURL?.path)
        let durable = try #require(machine.disk.durableContents(of: file))

        machine.store.set("new", forKey: "a")
        machine.disk.failNext(operation, with: .noSpace)
        #expect(!machine.store.synchronize())
        let line = try #require(machine.capture.all.first { $0.message.contains("could not save the store") })
        #expect(line.level == .error && line.metadata["error"]?.contains("No space left on device") == true
                && line.metadata["store"] == Self.storeIdentifier, "\(line.text)")
        #expect(machine.disk.durableContents(of: file) == durable)
        // No temporary file left (after a failed directory sync, it was renamed already).
        #expect(machine.disk.paths.filter { $0.contains(AtomicFile.temporaryMarker) } == [], "\(machine.disk.paths)")
        #expect(machine.values == ["a": "new"])    // still in memory, saved at the next try

        try await machine.crashAndReboot()
        #expect(machine.values == ["a": "kept"])
        machine.store.set("saved", forKey: "a")
        #expect(machine.store.synchronize())
        try await machine.crashAndReboot()
        #expect(machine.values == ["a": "saved"])
        await machine.device.stop()
    }

    @Test("Write-behind on the test's clock: a burst of writes is one save, durable only once it runs; a failed one is retried 5 s later")
    func writeBehindOnTheTestsClock() async throws {
        let disk = SimulatedDisk()
        let pending = Locked<[(delay: Duration, save: @Sendable () -> Void)]>([])
        func runNext() -> Duration? {
            guard let next = pending.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return nil }
            next.save()
            return next.delay
        }
        var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: Self.dataDirectory, writeBehindDelay: .seconds(1),
                                                                  sync: .disabled, logger: Logger(label: "test"))
        configuration.attach = .embedded
        let device = try disk.device(configuration) { delay, save in pending.withLock { $0.append((delay, save)) } }
        let store = try device.store(Self.storeIdentifier)
        let file = try #require(store.fileURL?.path)
        store.set("a", forKey: "k")
        store.set("b", forKey: "j")
        #expect(pending.withLock(\.count) == 1)
        #expect(disk.durableContents(of: file) == nil)
        #expect(runNext() == .seconds(1))
        let saved = try #require(disk.durableContents(of: file))
        #expect(try ReplicaFile.decode(saved, path: file).replica.visibleValues.count == 2)

        store.set("c", forKey: "k")
        disk.failNext(.sync)
        #expect(runNext() == .seconds(1))                          // fails: retried later
        #expect(disk.durableContents(of: file) == saved)
        #expect(runNext() == .seconds(5))
        #expect(try ReplicaFile.decode(try #require(disk.durableContents(of: file)), path: file).replica.value(forKey: "k") == "c")
        #expect(pending.withLock(\.isEmpty))
        await device.stop()
    }

    @Test("The disk itself: bytes durable at fsync, names at the directory's fsync, a crash keeps only those")
    func diskModel() throws {
        let disk = SimulatedDisk()
        try disk.createDirectory("/d", mode: 0o700)
        try disk.writeFile(Data("one".utf8), to: "/d/f", mode: 0o600)
        try disk.syncFile("/d/f")
        #expect(disk.durableContents(of: "/d/f") == nil)          // its name is not durable yet
        try disk.syncDirectory(of: "/d/f")
        #expect(disk.durableContents(of: "/d/f") == Data("one".utf8))
        try disk.writeFile(Data("two".utf8), to: "/d/f", mode: 0o600)
        try disk.replace(Data("three".utf8), at: "/d/g")
        var stale: (any StoreDiskLock)? = try disk.lock("/d/f.lock")
        #expect(throws: PersistenceError.self) { try disk.lock("/d/f.lock") }
        disk.crash()
        #expect(throws: PersistenceError.self) { try disk.read("/d/f") }
        disk.restart()
        #expect(try disk.read("/d/f") == Data("one".utf8))
        #expect(try disk.read("/d/g") == Data("three".utf8))
        let held = try disk.lock("/d/f.lock")                      // the crash released it
        stale = nil                                                  // letting go of the stale one releases nothing
        #expect(throws: PersistenceError.self) { try disk.lock("/d/f.lock") }
        withExtendedLifetime((held, stale)) {}
    }
}
