import Foundation
import Hearth
import HearthCore

/// A store kept open and syncing until SIGINT or SIGTERM (`watch` and `serve`), printing
/// each external change as it happens and publishing its state in a status file for
/// `hearth peers` and `hearth status`.
struct StoreSession {
    let access: StoreAccess
    let printChanges: Bool
    let json: Bool
    let label: String

    func run() async throws {
        let store = try access.open()
        let signals = SignalWaiter()
        let port: Int?
        do {
            port = store.isSyncing ? try await store.syncPort() : nil
        } catch {
            await store.close()
            throw CommandError(.general, "cannot sync store \(access.storeIdentifier): \(error)")
        }
        let status = StatusFile(location: access.location)
        let lastExchange = LastExchange()
        let device = access.identity?.deviceID.hex
        note("\(label) \(access.storeIdentifier) as \(access.whoAmI)"
             + (port.map { "; listening on port \($0)" } ?? "; not syncing (signed out)")
             + "; peers: \(access.options.discoveryDescription). Ctrl-C to stop.")

        let discovery = access.options.discoveryDescription
        let publish: @Sendable () -> Void = {
            let metrics = store.syncMetrics
            status.write(.init(pid: getpid(), port: port, device: device,
                               connectedPeers: store.connectedPeerDeviceIDs,
                               lastExchange: lastExchange.date,
                               entries: metrics.map { ($0.entriesSent, $0.entriesReceived) }, discovery: discovery,
                               discoveredPeers: store.discoveredPeers))
        }
        let changes = store.changes
        let printer = Task {
            for await change in changes {
                // What is printed is on disk too, so a `hearth get` right after sees it.
                store.synchronize()
                if change.reason != .quotaViolationChange {
                    lastExchange.date = Date()
                    publish()
                }
                guard printChanges else { continue }
                let values = change.keys.map { ($0, store.value(forKey: $0)) }
                if json {
                    let fields = values.map { "\(PropertyListJSON.quote($0.0)):\($0.1.map(PropertyListJSON.string) ?? "null")" }
                    emit("{\"reason\":\"\(change.reason)\",\"code\":\(change.reason.rawValue),\"values\":{\(fields.joined(separator: ","))}}")
                } else {
                    for (key, value) in values {
                        emit("\(change.reason) (\(change.reason.rawValue)): \(key) " + (value.map { "= \(PropertyListJSON.human($0))" } ?? "removed"))
                    }
                }
            }
        }
        let publisher = Task {
            var previous = store.syncMetrics
            while !Task.isCancelled {
                let metrics = store.syncMetrics
                if let metrics, metrics.entriesSent != previous?.entriesSent || metrics.entriesReceived != previous?.entriesReceived {
                    lastExchange.date = Date()
                }
                previous = metrics
                publish()
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
        // hearth set/rm find the store locked by us and send their writes here.
        let control = ControlServer(path: ControlSocket.path(for: access.location))
        control?.start { line in await WriteRequest.answer(line, store: store) }
        if control == nil { note("\(label): no control socket; hearth set/rm on this store will report it locked") }
        let received = await signals.wait()
        control?.stop()
        note("\(label): \(received == SIGINT ? "interrupted" : "terminated"); saving and closing")
        publisher.cancel()
        printer.cancel()
        await store.close()
        status.remove()
    }
}

/// When entries last moved between this store and a peer.
final class LastExchange: Sendable {
    private let value = Locked<Date?>(nil)
    var date: Date? {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

/// `<store>.status.json` beside the store's file while `watch` or `serve` holds it open.
struct StatusFile {
    struct Contents: Codable {
        var pid: Int32
        var port: Int?
        var device: String?
        var connectedPeers: [String]
        var lastExchange: Date?
        var entriesSent = 0
        var entriesReceived = 0
        var updated = Date()
        var discovery: String?
        /// Peers discovery reports, connected or not (absent in files of older versions).
        var discoveredPeers: [String]?

        init(pid: Int32, port: Int?, device: String?, connectedPeers: [String], lastExchange: Date?, entries: (sent: Int, received: Int)?,
             discovery: String?, discoveredPeers: [String]? = nil) {
            self.discovery = discovery
            self.discoveredPeers = discoveredPeers
            self.pid = pid
            self.port = port
            self.device = device
            self.connectedPeers = connectedPeers
            self.lastExchange = lastExchange
            entriesSent = entries?.sent ?? 0
            entriesReceived = entries?.received ?? 0
        }
    }

    let path: String

    init(location: StoreLocation) {
        path = (location.directory as NSString).appendingPathComponent(StoreLocation.escape(location.storeIdentifier) + ".status.json")
    }

    func write(_ contents: Contents) {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(contents) else { return }
        // Rewritten twice a second: atomic (rename) but not fsynced, it is only a hint.
        try? data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    /// The contents, if a live process wrote them.
    func read() -> Contents? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard let contents = try? decoder.decode(Contents.self, from: data), kill(contents.pid, 0) == 0 || errno == EPERM else { return nil }
        return contents
    }

    func remove() { unlink(path) }
}

