import Foundation
@testable import Hearth
import HearthCore
import HearthIdentity
@testable import HearthSync
import HearthTransport
import Logging
import NIOPosix
import Testing

/// Issue 27, point 4's rest: the event loop group a device's TLS connections run on is the
/// device's to choose (several devices then share nothing, not even NIO's singleton group).
@Suite("A device's event loop group")
struct DeviceEventLoopTests {
    @Test("A device given an event loop group runs its engine's TLS network on it; one not given, on NIO's shared one")
    func givenGroup() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-loops-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let accounts = AccountStore(directory: URL(fileURLWithPath: "\(root)/config"), logger: Logger(label: "test"), scrypt: .testing)
        _ = try accounts.createAccount(displayName: "Loops", passphrase: "pw", deviceName: "loops")
        let configuration = UbiquitousKeyValueStore.Configuration(
            dataDirectory: "\(root)/data", sync: SyncSettings(accountDirectory: "\(root)/config", discovery: .none, listenHost: "127.0.0.1"),
            logger: Logger(label: "test"))
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
}
