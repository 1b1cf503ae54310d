import Foundation
import Hearth

/// One `set` or `rm`: applied to the store directly, or, when `serve` or `watch` holds the
/// store, sent to that process through its control socket and applied there.
struct WriteRequest {
    var key: String
    /// The new value; nil removes the key.
    var value: PropertyListValue?
    var wait: Double
    var minimumPeers: Int

    /// Applies the write and waits for peers as asked; throws the command's errors.
    /// `forwarded` says whether the process holding the store applied it.
    func perform(_ access: StoreAccess) async throws -> (outcome: DeliveryOptions.Outcome, forwarded: Bool) {
        let store: UbiquitousKeyValueStore
        do {
            store = try access.open()
        } catch let error as CommandError where error.status == .storeLocked {
            let socket = ControlSocket.path(for: access.location)
            let waitFor = Duration.milliseconds(Int(wait * 1000))
            guard let reply = ControlSocket.request(line, to: socket, timeout: waitFor) else { throw error }
            return (try Self.outcome(fromReply: reply), true)
        }
        let outcome: DeliveryOptions.Outcome
        do {
            outcome = try await apply(to: store)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
        return (outcome, false)
    }

    /// Writes to an open store and waits for peers (in this process, or in the holder for a
    /// forwarded request).
    func apply(to store: UbiquitousKeyValueStore) async throws -> DeliveryOptions.Outcome {
        if value == nil, store.value(forKey: key) == nil {
            throw CommandError(.notFound, "no value for \(key) in store \(store.storeIdentifier)")
        }
        do {
            try store.setValue(value, forKey: key)
        } catch {
            throw commandError(error, key: key)
        }
        return await DeliveryOptions.deliver(store, wait: wait, minimumPeers: minimumPeers)
    }

    // MARK: The wire form

    /// `{"key": …, "value": …, "wait": …, "minPeers": …}`; no "value" for a removal.
    var line: String {
        var fields: [String: PropertyListValue] = ["key": .string(key), "wait": .double(wait), "minPeers": .integer(Int64(minimumPeers))]
        if let value { fields["value"] = value }
        return PropertyListJSON.string(.dictionary(fields))
    }

    init(key: String, value: PropertyListValue?, wait: Double, minimumPeers: Int) {
        self.key = key
        self.value = value
        self.wait = wait
        self.minimumPeers = minimumPeers
    }

    init?(line: String) {
        guard case .dictionary(let fields)? = try? PropertyListJSON.parse(line), let key = fields["key"]?.stringValue else { return nil }
        self.key = key
        value = fields["value"]
        wait = min(max(fields["wait"]?.doubleValue ?? 5, 0), 3600)
        minimumPeers = max(Int(fields["minPeers"]?.integerValue ?? 1), 1)
    }

    /// The holder's answer to a request line.
    static func answer(_ line: String, store: UbiquitousKeyValueStore) async -> String {
        guard let request = WriteRequest(line: line) else {
            return reply(status: CommandError.Status.usage.rawValue, message: "malformed request")
        }
        do {
            let outcome = try await request.apply(to: store)
            note("\(request.value == nil ? "removed" : "set") \(request.key) for another hearth process; \(outcome.sentence)")
            switch outcome {
            case .local: return reply(status: 0, outcome: "local", peers: 0)
            case .confirmed(let peers): return reply(status: 0, outcome: "confirmed", peers: peers)
            case .unconfirmed: return reply(status: 0, outcome: "unconfirmed", peers: 0)
            case .failed(let reason): return reply(status: 0, outcome: "failed", peers: 0, message: reason)
            }
        } catch let error as CommandError {
            return reply(status: error.status.rawValue, message: error.message)
        } catch {
            return reply(status: CommandError.Status.general.rawValue, message: "\(error)")
        }
    }

    private static func reply(status: Int32, outcome: String? = nil, peers: Int = 0, message: String? = nil) -> String {
        var fields: [String: PropertyListValue] = ["status": .integer(Int64(status)), "peers": .integer(Int64(peers))]
        if let outcome { fields["outcome"] = .string(outcome) }
        if let message { fields["message"] = .string(message) }
        return PropertyListJSON.string(.dictionary(fields))
    }

    static func outcome(fromReply reply: String) throws -> DeliveryOptions.Outcome {
        guard case .dictionary(let fields)? = try? PropertyListJSON.parse(reply), let status = fields["status"]?.integerValue else {
            throw CommandError(.general, "the hearth process that holds the store sent a malformed reply")
        }
        let message = fields["message"]?.stringValue ?? ""
        guard status == 0 else {
            throw CommandError(CommandError.Status(rawValue: Int32(status)) ?? .general, message)
        }
        switch fields["outcome"]?.stringValue {
        case "local": return .local
        case "confirmed": return .confirmed(peers: Int(fields["peers"]?.integerValue ?? 0))
        case "failed": return .failed(message)
        default: return .unconfirmed
        }
    }
}
