import Foundation
@testable import Hearth
import HearthCore
import HearthIdentity
import HearthTesting
import HearthTestSupport
import Logging
import Testing

/// Issue 27, point 1: a device is one object that owns its stores, engines and account watcher;
/// several run in one process sharing no registry; `stop()` is a barrier. Two devices sync on
/// HearthTesting's in-memory network (no sockets); the barrier's port is a real one, on
/// loopback. Waits are events (`syncPort`, `waitUntilSynced`), never sleeps.
@Suite("One device, one owner")
struct DeviceObjectTests {
    static let storeIdentifier = "com.example.device"
    static let far = Duration.seconds(60)

    /// Two devices of one household, each with its own data and account directories, under `root`.
    struct Household {
        let root: String

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-device-\(UUID().uuidString)").path
            let logger = Self.logger
            // Cheap scrypt: the standard cost takes a second and 256 MiB per account.
            let first = AccountStore(directory: URL(fileURLWithPath: accountDirectory(0)), logger: logger, scrypt: .testing)
            let owner = try first.createAccount(displayName: "Device household", passphrase: "device", deviceName: "device-0")
            let bundle = try first.exportJoinBundle(owner.account.id)
            let second = AccountStore(directory: URL(fileURLWithPath: accountDirectory(1)), logger: logger, scrypt: .testing)
            _ = try second.importJoinBundle(bundle, passphrase: "device", deviceName: "device-1")
        }

        static let logger = {
            var logger = Logger(label: "test")
            logger.logLevel = .warning
            return logger
        }()

        func accountDirectory(_ index: Int) -> String { "\(root)/device\(index)/config" }

        /// Device `index`'s configuration: loopback, peers added by address (no discovery), the
        /// store owned here (never attached to a daemon of the user running the tests), and a
        /// write-behind delay longer than any test, so that only `synchronize()` or `stop()` saves.
        func configuration(_ index: Int, port: Int = 0, sync: Bool = true, network: InMemoryNetwork? = nil) -> UbiquitousKeyValueStore.Configuration {
            var settings = SyncSettings(isEnabled: sync, accountDirectory: accountDirectory(index), discovery: .none,
                                        listenHost: "127.0.0.1", port: port, heartbeatInterval: .milliseconds(300), timeout: .seconds(10))
            if let network { settings.environment = network.environment() }
            var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: "\(root)/device\(index)/data",
                                                                      writeBehindDelay: .seconds(3600), sync: settings,
                                                                      logger: Self.logger)
            configuration.attach = .embedded
            return configuration
        }

        func cleanUp() { try? FileManager.default.removeItem(atPath: root) }
    }

    @Test("Two devices in one process, each with its own directories: a write on one reaches the other")
    func twoDevicesSync() async throws {
        let household = try Household()
        defer { household.cleanUp() }
        let network = InMemoryNetwork()
        let first = try HearthDevice(household.configuration(0, network: network))
        let second = try HearthDevice(household.configuration(1, network: network))
        let a = try first.store(Self.storeIdentifier)
        let b = try second.store(Self.storeIdentifier)
        let port = try #require(try await a.syncPort())
        #expect(try await b.syncPort() != port)
        b.addSyncPeer(host: "memory", port: port)

        a.set("from the first device", forKey: "note")
        #expect(await a.waitUntilSynced(timeout: Self.far))
        #expect(b.string(forKey: "note") == "from the first device")
        b.set("and back", forKey: "reply")
        #expect(await b.waitUntilSynced(timeout: Self.far))
        #expect(a.string(forKey: "reply") == "and back")

        // Each device runs its own engine: one each, not two in a table both see.
        let engines = (first.runningEngines, second.runningEngines)
        #expect(engines == (1, 1))
        await first.stop()
        await second.stop()
    }

    @Test("stop() is a barrier: stores saved and closed, the port free at once, the watcher's thread ended")
    func stopIsABarrier() async throws {
        let household = try Household()
        defer { household.cleanUp() }
        let device = try HearthDevice(household.configuration(0))
        let store = try device.store(Self.storeIdentifier)
        let port = try #require(try await store.syncPort())
        // Written to memory only: the write-behind delay is an hour.
        store.set("kept", forKey: "k")
        let watcher = device.watcher
        #expect(watcher.isThreadRunning)

        await device.stop()

        #expect(!watcher.isThreadRunning)
        let engines = device.runningEngines
        #expect(engines == 0)
        #expect(throws: KeyValueStoreError.deviceStopped) { _ = try device.store(Self.storeIdentifier) }
        // A new device binds the same port at once, and opens the store (its lock is free: the
        // configuration never attaches) to find the write on disk.
        let next = try HearthDevice(household.configuration(0, port: port))
        let reopened = try next.store(Self.storeIdentifier)
        #expect(try await reopened.syncPort() == port)
        #expect(reopened.string(forKey: "k") == "kept")
        await next.stop()
    }

    // Identities are compared, not objects: Swift Testing shows a failed expectation's
    // operands, and a store's state cannot be reflected (it is ~Copyable).
    @Test("Two devices share no state: a store of one identifier is two backends, and each device's table is its own")
    func nothingShared() async throws {
        let household = try Household()
        defer { household.cleanUp() }
        let first = try HearthDevice(household.configuration(0, sync: false))
        let second = try HearthDevice(household.configuration(1, sync: false))
        let a = try first.store(Self.storeIdentifier)
        let b = try second.store(Self.storeIdentifier)
        #expect(ObjectIdentifier(a.backend) != ObjectIdentifier(b.backend))
        // The same device hands out the same backend: its table works.
        let again = ObjectIdentifier(try first.store(Self.storeIdentifier).backend)
        #expect(again == ObjectIdentifier(a.backend))
        a.set("only on the first", forKey: "k")
        #expect(b.object(forKey: "k") == nil)
        let parts = { (device: HearthDevice) in
            [ObjectIdentifier(device.watcher), ObjectIdentifier(device.records), ObjectIdentifier(device.stores)]
        }
        let (firstParts, secondParts) = (parts(first), parts(second))
        #expect(Set(firstParts).isDisjoint(with: secondParts))

        // Stopping one leaves the other working.
        await first.stop()
        b.set("still open", forKey: "k")
        #expect(b.synchronize())
        #expect(b.string(forKey: "k") == "still open")
        await second.stop()
    }

    @Test("Stores opened with one configuration, without a device, still share one backend and one engine (the default device)")
    func defaultDevice() async throws {
        let household = try Household()
        defer { household.cleanUp() }
        let configuration = household.configuration(0)
        let a = try UbiquitousKeyValueStore(storeIdentifier: Self.storeIdentifier, configuration: configuration)
        let b = try UbiquitousKeyValueStore(storeIdentifier: Self.storeIdentifier, configuration: configuration)
        let other = try UbiquitousKeyValueStore(storeIdentifier: "com.example.other", configuration: configuration)
        #expect(ObjectIdentifier(a.backend) == ObjectIdentifier(b.backend))
        let port = try await a.syncPort()
        #expect(try await other.syncPort() == port)
        let device = HearthDevice.defaultDevice(for: configuration)
        let running = device.runningEngines
        #expect(running == 1)
        // A device made for the same folder is not the default one.
        #expect(ObjectIdentifier(try HearthDevice(configuration)) != ObjectIdentifier(device))
        await a.internals.close()
        await other.internals.close()
        let engines = device.runningEngines
        #expect(engines == 0)
    }

    @Test("The default devices of many data directories share one account watcher (one thread, one inotify instance): a watcher each ran the suite's user out of inotify instances")
    func defaultDevicesShareOneWatcher() async throws {
        let household = try Household()
        defer { household.cleanUp() }
        var devices: [HearthDevice] = []
        for index in 0..<50 {
            var configuration = household.configuration(0, sync: false)
            configuration.dataDirectory = "\(household.root)/many/\(index)"
            devices.append(HearthDevice.defaultDevice(for: configuration))
        }
        #expect(Set(devices.map { ObjectIdentifier($0) }).count == 50, "one default device per data directory")
        #expect(Set(devices.map { ObjectIdentifier($0.watcher) }).count == 1, "the default devices' watchers")
        // A device made by hand has its own, which its stop() ends.
        let own = try HearthDevice(household.configuration(1, sync: false))
        #expect(ObjectIdentifier(own.watcher) != ObjectIdentifier(devices[0].watcher))
        await own.stop()
    }
}
