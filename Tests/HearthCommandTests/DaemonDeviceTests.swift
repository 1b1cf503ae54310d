import Foundation
import Hearth
import HearthCore
import HearthDaemon
import Testing

/// Issue 27, point 4's rest (the daemon a mode of the library, with one owner): the device
/// daemon runs the `HearthDevice` it is given, or one of its own that it stops with itself;
/// never the process's default device of its data folder. In-process: no `hearth` executable.
@Suite struct DaemonDeviceTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-daemondevice-\(UUID().uuidString)").path
    /// Short, as a socket's path must fit in 108 bytes.
    let runtime = "/tmp/hdd-\(UUID().uuidString.prefix(8))"
    let notes = Locked<[String]>([])

    func options(device: HearthDevice?) -> DaemonOptions {
        DaemonOptions(folders: DeviceFolders(accountDirectory: URL(fileURLWithPath: "\(root)/config"), storeDataDirectory: "\(root)/data"),
                      runtimeDirectory: runtime, rescanInterval: .seconds(3600),
                      output: DaemonOutput(note: { [notes] line in notes.withLock { $0.append(line) } }, emit: { _ in }),
                      device: device)
    }

    @Test("A daemon given a device holds its stores on it and leaves it running at stop")
    func givenDevice() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        // Embedded: were the daemon's store on another device of this process, opening it here
        // would find the file locked (storeLocked) rather than the same store.
        var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: "\(root)/data", sync: .disabled)
        configuration.attach = .embedded
        let device = try HearthDevice(configuration)
        let daemon = try DeviceDaemon.start(options(device: device))
        #expect(daemon.device === device)
        let location = StoreLocation(dataDirectory: "\(root)/data", storeIdentifier: "com.example.given", account: nil)
        #expect(try await DaemonControl.askToHold(location, runtimeDirectory: runtime), "\(notes.withLock { $0 })")
        let write = WriteRequest(store: location.storeIdentifier, key: "color", value: .string("teal"), wait: 0, minimumPeers: 1)
        guard case .reply = try await ControlSocket.exchange(ControlRequest.write(write).line,
                                                             with: ControlSocket.path(for: location, under: "/tmp"), timeout: .seconds(10)) else {
            Issue.record("the held store did not answer")
            await daemon.stop()
            return
        }
        // The daemon's store itself, on the given device: the write is there, no attaching.
        let store = try device.store(location.storeIdentifier)
        #expect(store.string(forKey: "color") == "teal")

        await daemon.stop()
        // The device is its maker's: still running, and the store, released by the daemon, is its own.
        let again = try device.store("com.example.other")
        again.set("still", forKey: "k")
        #expect(again.string(forKey: "k") == "still")
        await device.stop()
    }

    @Test("A daemon with no device makes its own and stops it with itself")
    func ownDevice() async throws {
        defer { try? FileManager.default.removeItem(atPath: root); try? FileManager.default.removeItem(atPath: runtime) }
        let daemon = try DeviceDaemon.start(options(device: nil))
        await daemon.stop()
        #expect(throws: KeyValueStoreError.self) { try daemon.device.store("com.example.after") }
    }
}
