import Foundation
@testable import Hearth
import HearthCore
import HearthIdentity
@testable import HearthSync
import HearthTransport
import Logging
import NIOCore
import NIOPosix
import Testing

/// Issue 27, point 4's rest: the event loop group a device's TLS connections run on is the
/// device's to choose (several devices then share nothing, not even NIO's singleton group);
/// point 1: so are its local sockets (hosting a store for other processes, attaching to one).
@Suite("A device's event loop group")
struct DeviceEventLoopTests {
    @Test("A device given an event loop group runs its engine's TLS network on it; one not given, on NIO's shared one")
    func givenGroup() async throws {
        let root = try Self.signedIn("hearth-loops")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let configuration = Self.syncing(root, data: "data")
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

        for given in [true, false] {
            let device = try HearthDevice(configuration, disk: SystemDisk(), eventLoopGroup: given ? group : nil)
            let sync = try #require(try DeviceSync.start(device: device) { _ in nil })
            let transport = try #require(sync.engine.network as? PeerTransport)
            #expect((transport.group === group) == given)
            #expect((transport.group === MultiThreadedEventLoopGroup.singleton) == !given)
            await sync.stop()
            await device.stop()
        }
        try await group.shutdownGracefully()
    }

    @Test("The daemon's device (onOneEventLoop) runs its TLS network and its stores' sockets on one loop; another device hosts on NIO's shared group")
    func oneLoop() async throws {
        let root = try Self.signedIn("hearth-oneloop")
        defer { try? FileManager.default.removeItem(atPath: root) }
        for oneLoop in [true, false] {
            let configuration = Self.syncing(root, data: "data-\(oneLoop)")
            let device = oneLoop ? try HearthDevice.onOneEventLoop(configuration) : try HearthDevice(configuration, disk: SystemDisk())
            let sync = try #require(try DeviceSync.start(device: device) { _ in nil })
            // Two stores: NIO's group hands out its loops in turn, so a host on it would land on
            // another loop than the sessions' for one of them.
            for name in ["com.example.loops", "com.example.loops2"] {
                let store = try device.store(name)
                let host = try #require(store.backend.state.withLock { $0.localHost })
                let loops = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())
                #expect(loops.contains { $0 === host.server.eventLoop })
                if oneLoop {
                    let transport = try #require(sync.engine.network as? PeerTransport)
                    let loop = try #require(transport.group as? any EventLoop)
                    #expect(host.server.eventLoop === loop, "the stores' sockets on the sessions' loop")
                } else {
                    #expect(device.eventLoopGroup === MultiThreadedEventLoopGroup.singleton)
                }
            }
            await sync.stop()
            await device.stop()
        }
    }

    @Test("A device given an event loop group hosts its stores for other processes on it, and a device attached to it connects (and, once the host goes, hosts) on its own; without one, on NIO's shared one")
    func localSocketsOnTheDevicesGroup() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-loops-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: "\(root)/data", sync: .disabled, logger: Logger(label: "test"))
        let (hostGroup, clientGroup) = (MultiThreadedEventLoopGroup(numberOfThreads: 1), MultiThreadedEventLoopGroup(numberOfThreads: 1))
        let singleton: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton

        for given in [true, false] {
            let store = "com.example.loops-\(given)"
            let host = try HearthDevice(configuration, disk: SystemDisk(), eventLoopGroup: given ? hostGroup : nil)
            let hosting = try host.store(store)
            hosting.set("from the host", forKey: "k")
            // The second device finds the file held and attaches (one device per data directory is
            // the rule; two here play two processes). Its open waits for the host: off the pool.
            let client = try HearthDevice(configuration, disk: SystemDisk(), eventLoopGroup: given ? clientGroup : nil)
            let attached = try await Self.offPool { Result { () throws(KeyValueStoreError) in try client.store(store) } }.get()
            #expect(attached.internals.isAttached)
            #expect(attached.string(forKey: "k") == "from the host", "the attach worked")

            let server = try #require(hosting.backend.state.withLock { $0.localHost }?.server)
            let connection = try #require(attached.backend.state.withLock { $0.attachment?.channel })
            // Each group here has one loop; the singleton has one per core.
            let (hostLoops, clientLoops) = given ? (hostGroup.makeIterator(), clientGroup.makeIterator())
                                                 : (singleton.makeIterator(), singleton.makeIterator())
            #expect(hostLoops.contains { $0 === server.eventLoop }, "the host's socket")
            #expect(clientLoops.contains { $0 === connection.eventLoop }, "the attached store's connection")
            if given {
                // The host goes: the attached store takes the file over and hosts it on its own
                // device's group. Its client wakes once the new host listens (an event, no polling).
                let attachment = try #require(attached.backend.state.withLock { $0.attachment?.store })
                await hosting.internals.close()
                let taken = await Self.offPool {
                    attachment.client.wait(until: .now() + .seconds(20)) { attached.backend.state.withLock { $0.localHost?.server } }
                }
                let server = try #require(taken, "the attached store took over within 20 s")
                #expect(clientGroup.makeIterator().contains { $0 === server.eventLoop }, "the socket of the store taken over")
            }
            await client.stop()
            await host.stop()
        }
        try await clientGroup.shutdownGracefully()
        try await hostGroup.shutdownGracefully()
    }

    /// A new temporary folder whose `config` holds a signed-in device of a new account.
    static func signedIn(_ prefix: String) throws -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID())").path
        let accounts = AccountStore(directory: URL(fileURLWithPath: "\(root)/config"), logger: Logger(label: "test"), scrypt: .testing)
        _ = try accounts.createAccount(displayName: "Loops", passphrase: "pw", deviceName: "loops")
        return root
    }

    /// A store configuration syncing as the device of `root`'s account, on loopback, no discovery.
    static func syncing(_ root: String, data: String) -> UbiquitousKeyValueStore.Configuration {
        UbiquitousKeyValueStore.Configuration(
            dataDirectory: "\(root)/\(data)", sync: SyncSettings(accountDirectory: "\(root)/config", discovery: .none, listenHost: "127.0.0.1"),
            logger: Logger(label: "test"))
    }

    /// Runs `work`, which blocks, on a Dispatch thread rather than the cooperative pool.
    static func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: work()) }
        }
    }
}
