import Foundation
@testable import Hearth
import HearthCore
import HearthSync
import HearthTesting
import HearthTestSupport
import Logging
import Testing

/// Issue 27, point 4 (the clock and the randomness injected): a device on a simulated disk,
/// given a clock and a seeded source of randomness in its sync environment, writes the same
/// store file byte for byte every run of a seed: every stamp, the run's replica ID and the file
/// itself come from what the device was given, none from the system.
@Suite("A device's time and randomness are its own")
struct DeviceTimeTests {
    /// The file a device writes after a few writes, a reopening (a new run, a new ID) and more.
    static func run(seed: UInt64) async throws -> Data {
        let disk = SimulatedDisk(seed: seed)
        let wall = Locked<UInt64>(1_000_000_000_000)          // 2001: far from the system's clock
        var environment = SyncEnvironment.system
        environment.clock.wallMilliseconds = { wall.withLock { $0 } }
        environment.random = .seeded(SplitMix64(seed: seed))
        var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: "/sim/device", writeBehindDelay: .seconds(3600),
                                                                  sync: .disabled, logger: Logger(label: "test"))
        configuration.sync.environment = environment
        var path = ""
        for _ in 0..<2 {
            let device = try disk.device(configuration)
            let store = try device.store("com.example.time")
            for i in 0..<5 {
                wall.withLock { $0 += 1_000 }
                store.set(Int64(i), forKey: "k\(i % 3)")
            }
            #expect(store.synchronize())
            path = try #require(store.fileURL?.path)
            await device.stop()
        }
        let replica = try ReplicaFile.decode(try #require(disk.contents(of: path)), path: path).replica
        // Stamped by the device's clock, not the system's.
        #expect(replica.entries.values.allSatisfy { $0.timestamp.milliseconds < 1_000_000_100_000 })
        return try #require(disk.durableContents(of: path))
    }

    @Test("Two runs of one seed write the same file; another seed another")
    func sameSeedSameBytes() async throws {
        let first = try await Self.run(seed: 7)
        let again = try await Self.run(seed: 7)
        let other = try await Self.run(seed: 8)
        #expect(first == again)
        #expect(first != other)
    }
}
