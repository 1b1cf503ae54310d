import Foundation
import HearthCore
import HearthIdentity

/// The messages of the sync protocol, each one frame: a binary property list dictionary
/// with a `type` field. docs/protocol.md documents every field.
public enum SyncMessage: Sendable, Equatable {
    /// First message on a connection, both ways.
    case hello(Hello)
    /// Entries the receiver lacks, with the certificates that verify them.
    case delta(Delta)
    /// What the sender has after applying a delta.
    case ack(VersionVector)
    /// Heartbeat with the sender's vector (so peers learn what it has even when idle, and
    /// can collect tombstones); answered by `pong`.
    case ping(VersionVector)
    case pong
    /// The devices of the account the sender knows of (32-byte device IDs), sent after the
    /// hello when the two hellos' ``Hello/peersDigest`` differ: the receiver keeps tombstones
    /// until each of them has acknowledged them.
    case peers([Data])
    /// Entries of a delta the receiver did not apply, each with why, and the receiver's wall
    /// clock (milliseconds since 1970), so that a writer whose clock is ahead can tell. The
    /// rest of the delta was applied; the link stays up.
    case refused(Refusal)

    /// At most this many refused entries are read from a `refused` message.
    public static let maximumRefusals = 1024

    /// The largest frame read before the peer's hello is verified, hello included: nothing
    /// bigger is even decoded from a peer that has not yet proved who it is. A hello carries a
    /// vector of at most `Replica.maximumVectorOrigins` counters, about 170 KB.
    public static let maximumHelloSize = 256 * 1024

    /// At most this many entries in one delta. Senders split what a peer lacks into deltas of
    /// at most this many entries (and about a megabyte); a receiver refuses a bigger delta.
    public static let maximumDeltaEntries = 8192

    /// A vector in a message may name at most this many origins (`Replica.maximumVectorOrigins`).
    public static let maximumVectorOrigins = Replica.maximumVectorOrigins

    /// At most this many device IDs are read from a `peers` message: a household is a few
    /// devices, and a misbehaving peer must not grow our list of devices without bound.
    public static let maximumPeers = 64

    /// The digest of a set of known devices that a hello carries: the first 8 bytes of the
    /// SHA-256 of the 32-byte IDs, sorted and concatenated. Equal digests: nothing to tell.
    public static func peersDigest(_ devices: some Sequence<Data>) -> Data {
        Data(SHA256.hash(devices.sorted { $0.lexicographicallyPrecedes($1) }.reduce(into: Data()) { $0.append($1) }).prefix(8))
    }

    public struct Hello: Sendable, Equatable {
        public var protocolVersion: Int
        /// The account ID, hex.
        public var account: String
        public var store: String
        /// The sender's device ID (32 bytes).
        public var device: Data
        public var vector: VersionVector
        /// The device's signature over ``signingBytes``.
        public var signature: Data
        /// ``SyncMessage/peersDigest(_:)`` of the devices the sender knows of, itself included;
        /// when it differs from the receiver's own, each side sends a ``SyncMessage/peers(_:)``
        /// message. Not signed (the TLS peer vouches for it, as for everything it sends); empty
        /// in hellos of earlier builds.
        public var peersDigest: Data

        public init(protocolVersion: Int, account: String, store: String, device: Data, vector: VersionVector,
                    signature: Data, peersDigest: Data = Data()) {
            self.protocolVersion = protocolVersion
            self.account = account
            self.store = store
            self.device = device
            self.vector = vector
            self.signature = signature
            self.peersDigest = peersDigest
        }

        /// `"hearth-hello-v1" 00 · u32 version · account · store · device · vector signing bytes`
        /// (strings and the device ID as u32 length + bytes).
        public var signingBytes: [UInt8] {
            var w = CanonicalWriter(capacity: 128)
            w.writeBytes(Array("hearth-hello-v1".utf8) + [0])
            w.writeUInt32(UInt32(truncatingIfNeeded: protocolVersion))
            w.writeString(account)
            w.writeString(store)
            w.writeUInt32(UInt32(device.count))
            w.writeBytes(device)
            w.writeBytes(vector.signingBytes)
            return w.bytes
        }
    }

    public struct Delta: Sendable, Equatable {
        public var entries: [Entry]
        /// DER device certificates of the signers.
        public var certificates: [Data]
        /// The sender's vector: what it had when it sent the delta. A claim, not a fact: the
        /// receiver's vector advances by the entries it applies, never by this.
        public var vector: VersionVector
        /// Entries of the frame that did not decode or break ``StoreLimits`` (only on receipt;
        /// never encoded). They are refused; the others apply.
        public var undecodable: [RefusedEntry]
        /// More deltas of the same batch follow (a big batch is split; the receiver's first
        /// download lasts until the last part).
        public var more: Bool

        public init(entries: [Entry], certificates: [Data], vector: VersionVector, undecodable: [RefusedEntry] = [], more: Bool = false) {
            self.entries = entries
            self.certificates = certificates
            self.vector = vector
            self.undecodable = undecodable
            self.more = more
        }
    }

    public struct Refusal: Sendable, Equatable {
        public var entries: [RefusedEntry]
        /// The receiver's wall clock when it refused them, in milliseconds since 1970.
        public var clock: UInt64

        public init(entries: [RefusedEntry], clock: UInt64) {
            self.entries = entries
            self.clock = clock
        }
    }

    /// 2: entries refused one by one (`refused`), vectors advanced only by applied entries.
    public static let protocolVersion = 2
}

/// Why a frame is not a valid message.
public struct SyncProtocolError: Error, Hashable, Sendable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

extension SyncMessage {
    public var propertyList: PropertyListValue {
        switch self {
        case .hello(let h):
            return ["type": "hello", "protocol": .integer(Int64(h.protocolVersion)), "account": .string(h.account),
                    "store": .string(h.store), "device": .data(h.device), "vector": h.vector.propertyList,
                    "signature": .data(h.signature), "peersDigest": .data(h.peersDigest)]
        case .delta(let d):
            var fields: [String: PropertyListValue] = [
                "type": "delta", "entries": .array(d.entries.map(\.propertyList)),
                "certificates": .array(d.certificates.map(PropertyListValue.data)), "vector": d.vector.propertyList,
            ]
            if d.more { fields["more"] = true }
            return .dictionary(fields)
        case .refused(let r):
            return ["type": "refused", "entries": .array(r.entries.map(\.propertyList)),
                    "clock": .integer(Int64(clamping: r.clock))]
        case .ack(let vector): return ["type": "ack", "vector": vector.propertyList]
        case .ping(let vector): return ["type": "ping", "vector": vector.propertyList]
        case .pong: return ["type": "pong"]
        case .peers(let devices): return ["type": "peers", "devices": .array(devices.map(PropertyListValue.data))]
        }
    }

    /// The frame payload.
    public func encoded() throws(PropertyListEncodingError) -> Data { try BinaryPropertyList.encode(propertyList) }

    /// Parses a frame payload.
    ///
    /// The message's envelope is read field by field; a delta's entries one by one (see
    /// `Entry.decode(_:in:key:)`), so an entry that is malformed or breaks ``StoreLimits``
    /// lands in ``Delta/undecodable`` instead of failing the frame. Anything else that is
    /// wrong with the frame throws.
    public init(decoding data: Data) throws(SyncProtocolError) {
        func reading<T>(_ step: () throws(PropertyListDecodingError) -> T) throws(SyncProtocolError) -> T {
            do { return try step() } catch { throw SyncProtocolError("malformed frame: \(error)") }
        }
        var document = try reading { () throws(PropertyListDecodingError) in try BinaryPropertyList.Document(data) }
        guard let pairs = try reading({ () throws(PropertyListDecodingError) in try document.dictionary(document.root) }) else {
            throw SyncProtocolError("a message must be a dictionary with a type")
        }
        var objects: [String: BinaryPropertyList.Document.Object] = [:]
        for (name, object) in pairs where objects.updateValue(object, forKey: name) != nil {
            throw SyncProtocolError("malformed frame: the field \(name) appears twice")
        }
        guard let typeObject = objects["type"],
              let type = try reading({ () throws(PropertyListDecodingError) in try document.value(typeObject, maximumDepth: 0) }).stringValue else {
            throw SyncProtocolError("a message must be a dictionary with a type")
        }
        guard type == "delta" else {
            // Small messages: read whole, with the depth their fields need (a vector is 1 deep).
            var fields: [String: PropertyListValue] = [:]
            for (name, object) in objects {
                fields[name] = try reading { () throws(PropertyListDecodingError) in try document.value(object, maximumDepth: 2) }
            }
            try self.init(propertyList: .dictionary(fields))
            return
        }
        guard let entriesObject = objects["entries"],
              let list = try reading({ () throws(PropertyListDecodingError) in try document.array(entriesObject) }),
              let certificatesObject = objects["certificates"], let vectorObject = objects["vector"] else {
            throw SyncProtocolError("delta: entries, certificates or vector missing")
        }
        guard list.count <= Self.maximumDeltaEntries else {
            throw SyncProtocolError("delta: \(list.count) entries, more than \(Self.maximumDeltaEntries) in one delta")
        }
        var more = false
        if let moreObject = objects["more"] {
            guard let flag = try reading({ () throws(PropertyListDecodingError) in try document.value(moreObject, maximumDepth: 0) }).boolValue else {
                throw SyncProtocolError("delta: more is not a Boolean")
            }
            more = flag
        }
        let certificates = try reading { () throws(PropertyListDecodingError) in try document.value(certificatesObject, maximumDepth: 1) }
        guard let items = certificates.arrayValue else { throw SyncProtocolError("delta: certificates is not an array") }
        let ders = items.compactMap(\.dataValue)
        guard ders.count == items.count else { throw SyncProtocolError("delta: a certificate is not data") }
        guard let vector = VersionVector(propertyList: try reading({ () throws(PropertyListDecodingError) in
            try document.value(vectorObject, maximumDepth: 1)
        })) else {
            throw SyncProtocolError("delta: missing or malformed vector")
        }
        guard vector.counters.count <= Self.maximumVectorOrigins else {
            throw SyncProtocolError("delta: a vector of \(vector.counters.count) origins, more than \(Self.maximumVectorOrigins)")
        }
        var entries: [Entry] = []
        entries.reserveCapacity(list.count)
        var undecodable: [RefusedEntry] = []
        for object in list {
            switch Entry.decode(object, in: &document) {
            case .success(let entry): entries.append(entry)
            case .failure(let refused): undecodable.append(refused)
            }
        }
        self = .delta(Delta(entries: entries, certificates: ders, vector: vector, undecodable: undecodable, more: more))
    }

    public init(propertyList value: PropertyListValue) throws(SyncProtocolError) {
        guard let fields = value.dictionaryValue, let type = fields["type"]?.stringValue else {
            throw SyncProtocolError("a message must be a dictionary with a type")
        }
        func vector(_ name: String) throws(SyncProtocolError) -> VersionVector {
            guard let field = fields[name], let vector = VersionVector(propertyList: field) else {
                throw SyncProtocolError("\(type): missing or malformed \(name)")
            }
            guard vector.counters.count <= Self.maximumVectorOrigins else {
                throw SyncProtocolError("\(type): a vector of \(vector.counters.count) origins, more than \(Self.maximumVectorOrigins)")
            }
            return vector
        }
        switch type {
        case "hello":
            guard let version = fields["protocol"]?.integerValue, let account = fields["account"]?.stringValue,
                  let store = fields["store"]?.stringValue, let device = fields["device"]?.dataValue,
                  let signature = fields["signature"]?.dataValue else {
                throw SyncProtocolError("hello: a field is missing or of the wrong type")
            }
            self = .hello(Hello(protocolVersion: Int(truncatingIfNeeded: version), account: account, store: store,
                                device: device, vector: try vector("vector"), signature: signature,
                                peersDigest: fields["peersDigest"]?.dataValue ?? Data()))
        case "delta":
            // Through the frame path, so that entries are read one by one in both.
            let payload: Data
            do { payload = try BinaryPropertyList.encode(value) } catch { throw SyncProtocolError("delta: \(error)") }
            try self.init(decoding: payload)
        case "ack": self = .ack(try vector("vector"))
        case "ping": self = .ping(try vector("vector"))
        case "pong": self = .pong
        case "peers":
            guard let list = fields["devices"]?.arrayValue else { throw SyncProtocolError("peers: devices missing") }
            // Items that are not device IDs are dropped; past the cap, the rest is not read.
            self = .peers(list.prefix(Self.maximumPeers).compactMap(\.dataValue).filter { $0.count == 32 })
        case "refused":
            guard let list = fields["entries"]?.arrayValue, let clock = fields["clock"]?.integerValue else {
                throw SyncProtocolError("refused: entries or clock missing")
            }
            // Past the cap, the rest is not read; items that do not read are dropped.
            self = .refused(Refusal(entries: list.prefix(Self.maximumRefusals).compactMap(RefusedEntry.init(propertyList:)),
                                    clock: UInt64(clamping: clock)))
        default: throw SyncProtocolError("unknown message type \(String(reflecting: type))")
        }
    }
}
