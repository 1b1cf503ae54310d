import Foundation
import Hearth
import HearthCore
import HearthTestSupport
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
        await task.bounded(by: timeout).value
    }
}

/// The `hearth-test-writer` child program, built beside the test bundle. Its runs are
/// `ChildProcess`es: waited for without blocking a thread of the cooperative pool.
enum TestWriter {
    static var path: String {
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return exe.deletingLastPathComponent().appendingPathComponent("hearth-test-writer").path
    }

    static func start(_ arguments: [String], environment: [String: String]? = nil) throws -> ChildProcess {
        try ChildProcess(path, arguments, environment: environment.map { ProcessInfo.processInfo.environment.merging($0) { $1 } })
    }

    /// Runs to completion; returns standard output and the exit status.
    static func run(_ arguments: [String], environment: [String: String]? = nil) async throws -> (String, Int32?) {
        let result = try await ChildProcess.run(path, arguments, environment: environment.map { ProcessInfo.processInfo.environment.merging($0) { $1 } })
        return (result.output, result.status)
    }
}

/// Signed entries from an imaginary peer, to stand in for the sync engine.
struct FakePeer {
    var replica = Replica(id: ReplicaID(high: 0xFEED, low: 1))

    mutating func write(_ value: PropertyListValue?, forKey key: String) -> Entry {
        replica.write(value, forKey: StoreKey(key), wall: HybridLogicalClock.wallMilliseconds() + 1000)!
    }
}
