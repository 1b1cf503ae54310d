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
        /// The vector the receiver may merge once every entry is applied.
        public var vector: VersionVector

        public init(entries: [Entry], certificates: [Data], vector: VersionVector) {
            self.entries = entries
            self.certificates = certificates
            self.vector = vector
        }
    }

    public static let protocolVersion = 1
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
            return ["type": "delta",
                    "entries": .array(d.entries.map { entry in
                        var fields = entry.propertyList.dictionaryValue!
                        fields["key"] = .string(entry.key)
                        return .dictionary(fields)
                    }),
                    "certificates": .array(d.certificates.map(PropertyListValue.data)),
                    "vector": d.vector.propertyList]
        case .ack(let vector): return ["type": "ack", "vector": vector.propertyList]
        case .ping(let vector): return ["type": "ping", "vector": vector.propertyList]
        case .pong: return ["type": "pong"]
        case .peers(let devices): return ["type": "peers", "devices": .array(devices.map(PropertyListValue.data))]
        }
    }

    /// The frame payload.
    public func encoded() -> Data { BinaryPropertyList.encode(propertyList) }

    /// Parses a frame payload.
    public init(decoding data: Data) throws(SyncProtocolError) {
        let value: PropertyListValue
        do { value = try BinaryPropertyList.decode(data) } catch { throw SyncProtocolError("malformed frame: \(error)") }
        try self.init(propertyList: value)
    }

    public init(propertyList value: PropertyListValue) throws(SyncProtocolError) {
        guard let fields = value.dictionaryValue, let type = fields["type"]?.stringValue else {
            throw SyncProtocolError("a message must be a dictionary with a type")
        }
        func vector(_ name: String) throws(SyncProtocolError) -> VersionVector {
            guard let field = fields[name], let vector = VersionVector(propertyList: field) else {
                throw SyncProtocolError("\(type): missing or malformed \(name)")
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
            guard let list = fields["entries"]?.arrayValue, let certificates = fields["certificates"]?.arrayValue else {
                throw SyncProtocolError("delta: entries or certificates missing")
            }
            var entries: [Entry] = []
            entries.reserveCapacity(list.count)
            for item in list {
                guard let key = item.dictionaryValue?["key"]?.stringValue, let entry = Entry(key: key, propertyList: item) else {
                    throw SyncProtocolError("delta: malformed entry")
                }
                entries.append(entry)
            }
            let ders = certificates.compactMap(\.dataValue)
            guard ders.count == certificates.count else { throw SyncProtocolError("delta: a certificate is not data") }
            self = .delta(Delta(entries: entries, certificates: ders, vector: try vector("vector")))
        case "ack": self = .ack(try vector("vector"))
        case "ping": self = .ping(try vector("vector"))
        case "pong": self = .pong
        case "peers":
            guard let list = fields["devices"]?.arrayValue else { throw SyncProtocolError("peers: devices missing") }
            // Items that are not device IDs are dropped; past the cap, the rest is not read.
            self = .peers(list.prefix(Self.maximumPeers).compactMap(\.dataValue).filter { $0.count == 32 })
        default: throw SyncProtocolError("unknown message type \(String(reflecting: type))")
        }
    }
}
