import Foundation
import Hearth
import HearthCore
import HearthTesting
import Testing

@Suite("LogCapture")
struct LogCaptureTests {
    @Test("A store opened with a LogCapture's logger reports a damaged file there")
    func damagedFileIsLogged() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-logcapture-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let location = StoreLocation(dataDirectory: folder, storeIdentifier: "com.example.app")
        try FileManager.default.createDirectory(atPath: location.directory, withIntermediateDirectories: true)
        try Data("not a property list".utf8).write(to: URL(fileURLWithPath: location.filePath))

        // As Sources/HearthTesting/HearthTesting.docc/TestingYourApp.md shows it.
        let capture = LogCapture()
        var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: folder, sync: SyncSettings(isEnabled: false))
        configuration.logger = capture.logger("hearth")
        let store = try UbiquitousKeyValueStore(storeIdentifier: "com.example.app", configuration: configuration)
        let record = await capture.waitFor("damaged")
        #expect(record?.level == .error)
        #expect(record?.label == "hearth")
        #expect(store.dictionaryRepresentation.isEmpty)
    }
}
