import Foundation
import Hearth
import HearthCore
import Testing

/// A store in a fresh temporary directory, removed by `cleanUp()`.
struct TemporaryStore {
    let directory: String
    let identifier: String
    let store: UbiquitousKeyValueStore

    init(identifier: String = "com.example.test", writeBehindDelay: Duration = .seconds(1)) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-\(UUID())").path
        self.identifier = identifier
        store = try UbiquitousKeyValueStore(storeIdentifier: identifier,
                                            configuration: .init(dataDirectory: directory, writeBehindDelay: writeBehindDelay, sync: .disabled))
    }

    var location: StoreLocation { StoreLocation(dataDirectory: directory, storeIdentifier: identifier) }

    func cleanUp() { try? FileManager.default.removeItem(atPath: directory) }
}

/// Collects change events from a store's `changes` sequence.
final class ChangeRecorder: Sendable {
    private let task: Task<[ChangeEvent], Never>

    init(_ store: UbiquitousKeyValueStore, count: Int) {
        let stream = store.changes
        task = Task {
            var events: [ChangeEvent] = []
            for await event in stream {
                events.append(event)
                if events.count == count { break }
            }
            return events
        }
    }

    /// The events, once `count` have arrived or `timeout` passed.
    func events(timeout: Duration = .seconds(5)) async -> [ChangeEvent] {
        let task = self.task
        Task { try? await Task.sleep(for: timeout); task.cancel() }
        return await task.value
    }
}

/// The `hearth-test-writer` child program, built beside the test bundle.
enum TestWriter {
    static var path: String {
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return exe.deletingLastPathComponent().appendingPathComponent("hearth-test-writer").path
    }

    static func start(_ arguments: [String]) throws -> (Process, Pipe, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let output = Pipe(), input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, output, input)
    }

    /// Runs to completion; returns standard output and the exit status.
    static func run(_ arguments: [String]) throws -> (String, Int32) {
        let (process, output, input) = try start(arguments)
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (String(decoding: data, as: UTF8.self), process.terminationStatus)
    }
}

/// Signed entries from an imaginary peer, to stand in for the sync engine.
struct FakePeer {
    var replica = Replica(id: ReplicaID(high: 0xFEED, low: 1))

    mutating func write(_ value: PropertyListValue?, forKey key: String) -> Entry {
        replica.write(value, forKey: key, wall: HybridLogicalClock.wallMilliseconds() + 1000)!
    }
}
