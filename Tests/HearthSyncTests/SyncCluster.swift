import Foundation
import Hearth
import HearthTesting
import Logging
import Synchronization
import HearthIdentity
import Testing

/// N stores of one account on 127.0.0.1, each with its own data and account directories,
/// linked as asked (full mesh by default) through static peer lists on fixed ports, so a
/// stopped replica comes back on the same address.
final class SyncCluster: Sendable {
    let root: String
    let stores: [UbiquitousKeyValueStore]
    let ports: [Int]
    let deviceIDs: [DeviceID]
    let storeIdentifier: String

    let accountDirectories: [String]

    init(count: Int, links: [(Int, Int)]? = nil, storeIdentifier: String = "com.example.sync",
         clockSkews: [Duration]? = nil, heartbeat: Duration = .milliseconds(300)) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-cluster-\(UUID())").path
        self.root = root
        self.storeIdentifier = storeIdentifier
        let ports = try (0..<count).map { _ in try Self.freePort() }
        let links = links ?? (0..<count).flatMap { i in (i + 1..<count).map { (i, $0) } }
        // One account: created on device 0, joined by the others with a bundle.
        let first = AccountStore(directory: URL(fileURLWithPath: "\(root)/config0"), scrypt: .testing)
        let owner = try first.createAccount(displayName: "Test household", passphrase: "p", deviceName: "device-0")
        let bundle = try first.exportJoinBundle(owner.account.id)
        var devices = [owner.deviceID]
        for i in 1..<count {
            let accounts = AccountStore(directory: URL(fileURLWithPath: "\(root)/config\(i)"), scrypt: .testing)
            devices.append(try accounts.importJoinBundle(bundle, passphrase: "p", deviceName: "device-\(i)").deviceID)
        }
        var stores: [UbiquitousKeyValueStore] = []
        for i in 0..<count {
            let peers = links.compactMap { a, b in a == i ? b : b == i ? a : nil }.map { "127.0.0.1:\(ports[$0])" }
            let sync = SyncSettings(accountDirectory: "\(root)/config\(i)", discovery: .staticPeers(peers),
                                    listenHost: "127.0.0.1", port: ports[i], heartbeatInterval: heartbeat)
            var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: "\(root)/data\(i)",
                                                                      writeBehindDelay: .milliseconds(100), sync: sync)
            configuration.clockSkew = clockSkews?[i] ?? .zero
            if let level = ProcessInfo.processInfo.environment["HEARTH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) {
                configuration.logger.logLevel = level
            }
            stores.append(try UbiquitousKeyValueStore(storeIdentifier: storeIdentifier, configuration: configuration))
        }
        for store in stores { _ = try await store.syncPort() }
        self.stores = stores
        self.ports = ports
        deviceIDs = devices
        accountDirectories = (0..<count).map { "\(root)/config\($0)" }
    }

    /// A free port outside the ephemeral range (see `LoopbackCluster.freePort()`).
    static func freePort() throws -> Int {
        try LoopbackCluster.freePort()
    }

    /// Waits until every store shows the same values (and, if given, `expected`). The wait ends
    /// as soon as they do: the timeout is for a machine running the suite under ThreadSanitizer
    /// beside CPU hogs, where one delta of a thousand signed entries took longer than 10 s.
    func waitUntilConverged(_ indices: [Int]? = nil, expected: [String: PropertyListValue]? = nil,
                            timeout: Duration = .seconds(30)) async throws {
        let selected = (indices ?? Array(stores.indices)).map { stores[$0] }
        let deadline = ContinuousClock.now + timeout
        while true {
            let values = selected.map(\.values)
            if values.allSatisfy({ $0 == values[0] }), expected == nil || values[0] == expected { return }
            if ContinuousClock.now > deadline {
                // Say, for each key that differs, what every replica holds and covers.
                let replicas = selected.map(\.replica)
                let keys = Set(values.flatMap(\.keys)).filter { key in !values.allSatisfy { $0[key] == values[0][key] } }
                let detail = keys.sorted().map { key in
                    "\(key): " + replicas.map { r in
                        guard let e = r.entries[StoreKey(key)] else { return "none" }
                        return "\(e.isTombstone ? "tomb" : "value") \(e.timestamp) \(e.origin)#\(e.sequence)"
                    }.joined(separator: " | ")
                }
                let coverage = keys.sorted().compactMap { key -> String? in
                    let origins = Set(replicas.compactMap { $0.entries[StoreKey(key)]?.origin })
                    return origins.map { o in "\(key) \(o): " + replicas.map { String($0.vector[o]) }.joined(separator: ",") }.joined(separator: "; ")
                }
                Issue.record("not converged after \(timeout): \(values.map { $0.keys.sorted() })\n\(detail.joined(separator: "\n"))\nvectors: \(coverage.joined(separator: "\n"))")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Waits until every store has `count` connected peers (or the given per-store counts).
    func waitUntilConnected(_ counts: [Int], timeout: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + timeout
        while stores.map(\.connectedPeerCount) != counts {
            if ContinuousClock.now > deadline {
                Issue.record("connections \(stores.map(\.connectedPeerCount)), expected \(counts)")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func shutdown() async {
        for store in stores {
            await store.stopSync()
            store.synchronize()
        }
        try? FileManager.default.removeItem(atPath: root)
    }
}

/// Records a store's change events as they come, for tests to wait on with a timeout.
final class EventLog: Sendable {
    private let task: Task<Void, Never>

    init(_ store: UbiquitousKeyValueStore) {
        let stream = store.changes
        let box = EventBox()
        task = Task { for await event in stream { box.append(event) } }
        self.box = box
    }

    private let box: EventBox

    deinit { task.cancel() }

    /// The next unconsumed event with `reason` (earlier ones of other reasons are skipped),
    /// waiting up to `timeout`.
    func next(_ reason: ChangeReason, timeout: Duration = .seconds(30)) async -> ChangeEvent? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let event = box.take(reason) { return event }
            try? await Task.sleep(for: .milliseconds(10))
        }
        if let event = box.take(reason) { return event }   // the deadline may pass while we wait
        Issue.record("no \(reason) event within \(timeout)")
        return nil
    }

    var all: [ChangeEvent] { box.all }
}

final class EventBox: Sendable {
    private let state = Mutex<(events: [ChangeEvent], next: Int)>(([], 0))
    func append(_ event: ChangeEvent) { state.withLock { $0.events.append(event) } }
    var all: [ChangeEvent] { state.withLock { $0.events } }
    func take(_ reason: ChangeReason) -> ChangeEvent? {
        state.withLock { s in
            while s.next < s.events.count {
                let event = s.events[s.next]
                s.next += 1
                if event.reason == reason { return event }
            }
            return nil
        }
    }
}
