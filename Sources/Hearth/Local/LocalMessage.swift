import Foundation
import HearthCore

/// One message of the local attach protocol (docs/local-attach.md): what the process that
/// hosts a store and the processes attached to it say over the store's Unix socket.
///
/// Each message is a binary property list dictionary with a `type`, in a length-prefixed frame
/// (HearthTransport's `Frame`: 4-byte big-endian length, at most 4 MiB). Entries travel in the
/// replica file's and the sync protocol's form (`Entry.propertyList`), so what a client writes
/// is stored exactly as it was sent.
enum LocalMessage: Sendable, Equatable {
    /// The protocol version this build speaks. A host refuses a hello of another version.
    static let protocolVersion = 1
    /// At most this many entries in one message; a larger snapshot comes in parts.
    static let maximumEntries = 8192

    /// Client → host, first: who is asking for which store.
    struct Hello: Sendable, Equatable {
        var version: Int
        /// The store the client means: both must match the host's, or the host refuses.
        var dataDirectory: String
        var store: String
        /// The client's process ID, for the host's log lines.
        var pid: Int32
    }

    /// Host → client, after a hello (and again after the host switched accounts): every current
    /// entry of the host's replica, tombstones included, in one or more parts.
    struct Snapshot: Sendable, Equatable {
        /// The host's account (hex ID), `""` when signed out.
        var account: String
        /// The host's device ID (32 bytes), empty when signed out: clients write under origins
        /// bound to it (`ReplicaID.random(boundTo:)`), so that peers accept what the host signs.
        var device: Data
        var entries: [Entry]
        /// More parts follow.
        var more: Bool
        /// Why a snapshot comes after the first one (`accountChange`); `nil` for an attach.
        var reason: ChangeReason?
    }

    /// Host → client: the host refused one of the client's writes; it is not in the store.
    struct Refusal: Sendable, Equatable {
        var origin: ReplicaID
        var sequence: UInt64
        var key: String
        /// A `KeyValueStoreError.Code` raw value (`storeFull`, `tooManyKeys`, `valueTooLarge`, …).
        var code: String
        var reason: String
    }

    case hello(Hello)
    case snapshot(Snapshot)
    /// Client → host: the client's own writes (entries it stamped), in sequence order.
    case write([Entry])
    /// Host → client: per origin, the highest sequence of the client's writes the host applied.
    /// Hosts no longer send it (nothing waits for it; `durable` says what matters); a client
    /// still reads it, and ignores it, from a host of an earlier version.
    case acknowledged(VersionVector)
    /// Host → client: per origin, the highest sequence of the client's writes on disk.
    case durable(VersionVector)
    /// Host → client: entries that changed in the host's replica, and the reason to post.
    case change(ChangeReason, [Entry])
    /// Client → host: save now, then answer ``synchronized(_:saved:)`` with the same `id`.
    case synchronize(UInt64)
    case synchronized(UInt64, saved: Bool)
    case refused(Refusal)
    /// Either side, just before closing: why (a hello refused, a malformed frame).
    case error(String)

    // MARK: Encoding

    var propertyList: PropertyListValue {
        switch self {
        case .hello(let h):
            return ["type": "hello", "version": .integer(Int64(h.version)), "dataDirectory": .string(h.dataDirectory),
                    "store": .string(h.store), "pid": .integer(Int64(h.pid))]
        case .snapshot(let s):
            var fields: [String: PropertyListValue] = ["type": "snapshot", "account": .string(s.account), "device": .data(s.device),
                                                       "entries": .array(s.entries.map { $0.propertyList }), "more": .bool(s.more)]
            if let reason = s.reason { fields["reason"] = .integer(Int64(reason.rawValue)) }
            return .dictionary(fields)
        case .write(let entries):
            return ["type": "write", "entries": .array(entries.map { $0.propertyList })]
        case .acknowledged(let vector):
            return ["type": "acknowledged", "vector": vector.propertyList]
        case .durable(let vector):
            return ["type": "durable", "vector": vector.propertyList]
        case .change(let reason, let entries):
            return ["type": "change", "reason": .integer(Int64(reason.rawValue)), "entries": .array(entries.map { $0.propertyList })]
        case .synchronize(let id):
            return ["type": "synchronize", "id": .integer(Int64(bitPattern: id))]
        case .synchronized(let id, let saved):
            return ["type": "synchronized", "id": .integer(Int64(bitPattern: id)), "saved": .bool(saved)]
        case .refused(let r):
            return ["type": "refused", "origin": .data(Data(r.origin.bytes)), "sequence": .integer(Int64(bitPattern: r.sequence)),
                    "key": .string(r.key), "code": .string(r.code), "reason": .string(r.reason)]
        case .error(let reason):
            return ["type": "error", "reason": .string(reason)]
        }
    }

    /// The frame payload.
    func encoded() throws(PropertyListEncodingError) -> Data {
        try BinaryPropertyList.encode(propertyList)
    }

    // MARK: Decoding

    /// What a frame decodes to: the message, and the entries that could not be read (each
    /// with why; the others are in the message, as with a sync delta).
    struct Decoded {
        var message: LocalMessage
        var undecodable: [RefusedEntry]
    }

    /// Parses a frame payload. The envelope is read field by field with a bounded depth; entries
    /// one by one (`Entry.decode`, which applies ``StoreLimits``). Anything wrong with the
    /// envelope throws ``LocalProtocolError``.
    static func decode(_ data: Data) throws(LocalProtocolError) -> Decoded {
        func reading<T>(_ step: () throws(PropertyListDecodingError) -> T) throws(LocalProtocolError) -> T {
            do { return try step() } catch { throw LocalProtocolError("malformed frame: \(error)") }
        }
        var document = try reading { () throws(PropertyListDecodingError) in try BinaryPropertyList.Document(data) }
        guard let pairs = try reading({ () throws(PropertyListDecodingError) in try document.dictionary(document.root) }) else {
            throw LocalProtocolError("a message must be a dictionary with a type")
        }
        var objects = [String: BinaryPropertyList.Document.Object](minimumCapacity: pairs.count)   // sized once, not regrown
        for (name, object) in pairs where objects.updateValue(object, forKey: name) != nil {
            throw LocalProtocolError("malformed frame: the field \(name) appears twice")
        }
        // Every field but `entries` is small: read whole, at most a vector's depth.
        var fields = [String: PropertyListValue](minimumCapacity: objects.count)
        for (name, object) in objects where name != "entries" {
            fields[name] = try reading { () throws(PropertyListDecodingError) in try document.value(object, maximumDepth: 1) }
        }
        guard let type = fields["type"]?.stringValue else { throw LocalProtocolError("a message must be a dictionary with a type") }

        var undecodable: [RefusedEntry] = []
        func entries() throws(LocalProtocolError) -> [Entry] {
            guard let object = objects["entries"],
                  let list = try reading({ () throws(PropertyListDecodingError) in try document.array(object) }) else {
                throw LocalProtocolError("\(type): entries missing or not an array")
            }
            guard list.count <= maximumEntries else {
                throw LocalProtocolError("\(type): \(list.count) entries, more than \(maximumEntries) in one message")
            }
            var result: [Entry] = []
            result.reserveCapacity(list.count)
            for item in list {
                switch Entry.decode(item, in: &document) {
                case .success(let entry): result.append(entry)
                case .failure(let refused): undecodable.append(refused)
                }
            }
            return result
        }
        func integer(_ name: String) throws(LocalProtocolError) -> Int64 {
            guard let value = fields[name]?.integerValue else { throw LocalProtocolError("\(type): \(name) missing or not an integer") }
            return value
        }
        func string(_ name: String) throws(LocalProtocolError) -> String {
            guard let value = fields[name]?.stringValue else { throw LocalProtocolError("\(type): \(name) missing or not a string") }
            return value
        }
        func vector() throws(LocalProtocolError) -> VersionVector {
            guard let field = fields["vector"], let vector = VersionVector(propertyList: field) else {
                throw LocalProtocolError("\(type): vector missing or malformed")
            }
            return vector
        }
        func reason() throws(LocalProtocolError) -> ChangeReason {
            guard let reason = ChangeReason(rawValue: Int(truncatingIfNeeded: try integer("reason"))) else {
                throw LocalProtocolError("\(type): unknown reason \(try integer("reason"))")
            }
            return reason
        }

        let message: LocalMessage
        switch type {
        case "hello":
            message = .hello(Hello(version: Int(truncatingIfNeeded: try integer("version")), dataDirectory: try string("dataDirectory"),
                                   store: try string("store"), pid: Int32(truncatingIfNeeded: try integer("pid"))))
        case "snapshot":
            guard let device = fields["device"]?.dataValue, let more = fields["more"]?.boolValue else {
                throw LocalProtocolError("snapshot: device or more missing")
            }
            message = .snapshot(Snapshot(account: try string("account"), device: device, entries: try entries(), more: more,
                                         reason: fields["reason"] == nil ? nil : try reason()))
        case "write": message = .write(try entries())
        case "acknowledged": message = .acknowledged(try vector())
        case "durable": message = .durable(try vector())
        case "change": message = .change(try reason(), try entries())
        case "synchronize": message = .synchronize(UInt64(bitPattern: try integer("id")))
        case "synchronized":
            guard let saved = fields["saved"]?.boolValue else { throw LocalProtocolError("synchronized: saved missing") }
            message = .synchronized(UInt64(bitPattern: try integer("id")), saved: saved)
        case "refused":
            guard let originData = fields["origin"]?.dataValue, let origin = ReplicaID(bytes: originData) else {
                throw LocalProtocolError("refused: origin missing or malformed")
            }
            message = .refused(Refusal(origin: origin, sequence: UInt64(bitPattern: try integer("sequence")), key: try string("key"),
                                       code: try string("code"), reason: try string("reason")))
        case "error": message = .error(try string("reason"))
        default: throw LocalProtocolError("unknown message type \(String(reflecting: type))")
        }
        return Decoded(message: message, undecodable: undecodable)
    }
}
