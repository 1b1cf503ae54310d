import Foundation
import Hearth
import HearthCore

/// What `hearth` commands ask the process that holds a store, over ``ControlSocket``.
///
/// A request is one JSON object naming its operation (`op`) and its `store`, so the protocol
/// can grow, and a process hosting several stores can route by store:
///
/// | op | other fields | reply fields |
/// | --- | --- | --- |
/// | `set` | `id` (UUID), `key`, `value`, `wait`, `minPeers`, `retry` | `status`, `outcome`, `peers`, `required`, `message` |
/// | `rm` | `id`, `key`, `wait`, `minPeers`, `retry` | as `set` |
/// | `status` | none | `status`, then ``LiveStatus``'s fields |
/// | `get` | `key`, `json` (bool) | `status`, `text`: the value as `hearth get` prints it (7, not found, if none) |
///
/// Every reply has `status`: 0, or the command's exit status for the failure, with `message`.
/// Numbers may be written as JSON integers or doubles (`"wait": 1` and `"wait": 1.0` are the same).
package enum ControlRequest: Sendable {
    case write(WriteRequest)
    case status(store: String)
    /// One value as the holder has it in memory, rendered as JSON or for people: the file may
    /// not have it yet (a serve saves after each change, but its peers may already have heard
    /// that it applied the change).
    case get(store: String, key: String, json: Bool)

    package var store: String {
        switch self {
        case .write(let write): write.store
        case .status(let store), .get(let store, _, _): store
        }
    }

    package var line: String {
        switch self {
        case .write(let write): write.fields.line
        case .status(let store): JSONObject(["op": .string("status"), "store": .string(store)]).line
        case .get(let store, let key, let json):
            JSONObject(["op": .string("get"), "store": .string(store), "key": .string(key), "json": .bool(json)]).line
        }
    }

    package init(line: String) throws(CommandError) {
        guard let object = JSONObject(line: line) else { throw CommandError(.usage, "malformed request: not a JSON object") }
        guard let store = object.string("store") else { throw CommandError(.usage, "malformed request: no store") }
        switch object.string("op") {
        case "set", "rm": self = .write(try WriteRequest(object))
        case "status": self = .status(store: store)
        case "get":
            guard let key = object.string("key") else { throw CommandError(.usage, "malformed request: get names no key") }
            self = .get(store: store, key: key, json: object.bool("json") ?? false)
        case let op: throw CommandError(.usage, "unknown request op \(op.map { String(reflecting: $0) } ?? "(none)")")
        }
    }

    /// A failure reply.
    package static func reply(_ error: CommandError) -> String {
        JSONObject(["status": .integer(Int64(error.status.rawValue)), "message": .string(error.message)]).line
    }

    /// Reads a reply: its fields if its status is 0, else the error it carries. A holder never
    /// reports the store as locked, so such a status is read as a general failure: status 6
    /// must keep meaning that nothing was handed to a holder.
    package static func fields(ofReply line: String) throws(CommandError) -> JSONObject {
        guard let object = JSONObject(line: line), let status = object.integer("status") else {
            throw CommandError(.general, "the hearth process that holds the store sent a malformed reply")
        }
        guard status == 0 else {
            let code = CommandError.Status(rawValue: Int32(clamping: status)).flatMap { $0 == .storeLocked ? nil : $0 } ?? .general
            throw CommandError(code, object.string("message") ?? "the hearth process that holds the store failed")
        }
        return object
    }
}

/// A JSON object's fields, read as loosely as JSON itself is written: a number may be an
/// integer or a double wherever a number is expected.
package struct JSONObject: Sendable {
    package var fields: [String: PropertyListValue]

    package init(_ fields: [String: PropertyListValue]) { self.fields = fields }

    package init?(line: String) {
        guard case .dictionary(let fields)? = try? PropertyListJSON.parse(line) else { return nil }
        self.fields = fields
    }

    package var line: String { PropertyListJSON.string(.dictionary(fields)) }

    package subscript(name: String) -> PropertyListValue? {
        get { fields[name] }
        set { fields[name] = newValue }
    }

    package func double(_ name: String) -> Double? {
        switch fields[name] {
        case .double(let value)?: value
        case .integer(let value)?: Double(value)
        default: nil
        }
    }

    /// An integer, or a double without a fraction (`2.0`).
    package func integer(_ name: String) -> Int64? {
        switch fields[name] {
        case .integer(let value)?: value
        case .double(let value)? where value.rounded() == value: Int64(exactly: value)
        default: nil
        }
    }

    package func string(_ name: String) -> String? {
        if case .string(let value)? = fields[name] { return value }
        return nil
    }

    package func bool(_ name: String) -> Bool? {
        if case .bool(let value)? = fields[name] { return value }
        return nil
    }

    package func strings(_ name: String) -> [String]? {
        guard case .array(let items)? = fields[name] else { return nil }
        return items.compactMap { if case .string(let text) = $0 { text } else { nil } }
    }

    package func date(_ name: String) -> Date? {
        switch fields[name] {
        case .date(let date)?: date
        case .string(let text)?: PropertyListJSON.parseDate(text)
        default: nil
        }
    }
}

/// The holder's side of ``ControlRequest``: answers the requests for the store this process
/// holds. Writes are idempotent per request ID (``RecentRequests``), so a client that lost
/// its connection can ask again without the write being applied twice here.
package final class ControlHandler: Sendable {
    private let store: UbiquitousKeyValueStore
    private let status: @Sendable () -> LiveStatus
    private let recent = RecentRequests()
    /// Where each write done for another process is reported.
    private let note: @Sendable (String) -> Void

    package init(store: UbiquitousKeyValueStore, status: @escaping @Sendable () -> LiveStatus, note: @escaping @Sendable (String) -> Void) {
        self.store = store
        self.status = status
        self.note = note
    }

    package func answer(_ line: String) async -> String {
        let request: ControlRequest
        do {
            request = try ControlRequest(line: line)
        } catch {
            return ControlRequest.reply(error)
        }
        guard request.store == store.storeIdentifier else {
            return ControlRequest.reply(CommandError(.unknownStore, "this process holds store \(store.storeIdentifier), not \(request.store)"))
        }
        switch request {
        case .status:
            var object = status().fields
            object["status"] = .integer(0)
            return object.line
        case .write(let write):
            let (store, note) = (self.store, self.note)
            return await recent.answer(write.id) { await write.answer(store: store, note: note) }
        case .get(_, let key, let json):
            guard let value = store.value(forKey: key) else {
                return ControlRequest.reply(CommandError(.notFound, "no value for \(key) in store \(store.storeIdentifier)"))
            }
            let text = json ? PropertyListJSON.string(value) : PropertyListJSON.human(value)
            return JSONObject(["status": .integer(0), "text": .string(text)]).line
        }
    }
}

/// The outcomes of the last write requests this holder handled, by request ID, in memory.
/// A request seen before gets the first one's reply (waiting for it if it is still running)
/// instead of being applied again.
package final class RecentRequests: Sendable {
    /// Far more than the writes a client could retry at once; the oldest are forgotten first.
    package static let capacity = 1024

    private struct State: Sendable {
        var tasks: [UUID: Task<String, Never>] = [:]
        var order: [UUID] = []
    }

    private let state = Locked(State())

    package func answer(_ id: UUID, _ body: @escaping @Sendable () async -> String) async -> String {
        let task = state.withLock { s -> Task<String, Never> in
            if let running = s.tasks[id] { return running }
            let task = Task { await body() }
            s.tasks[id] = task
            s.order.append(id)
            if s.order.count > Self.capacity {
                s.tasks[s.order.removeFirst()] = nil
            }
            return task
        }
        return await task.value
    }
}
