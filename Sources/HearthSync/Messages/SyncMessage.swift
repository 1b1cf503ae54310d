import Foundation
import HearthCore
import HearthIdentity

/// The messages of the sync protocol, each one frame: a binary property list dictionary
/// with a `type` field. docs/protocol.md documents every field.
///
/// Protocol 3 carries every store two devices share on one connection: the hello is per
/// device and lists the stores the sender serves; every message about data names its store.
package enum SyncMessage: Sendable, Equatable {
    /// The message's kind as its `type` field names it ("hello", "delta", …), for log lines.
    package var kind: String {
        switch self {
        case .hello: "hello"
        case .store: "store"
        case .delta: "delta"
        case .ack: "ack"
        case .ping: "ping"
        case .pong: "pong"
        case .refused: "refused"
        case .removals: "removals"
        case .renew: "renew"
        case .certificate: "certificate"
        case .links: "links"
        }
    }

    /// First message on a connection, both ways.
    case hello(Hello)
    /// What the sender has of one store, when the hello's digests showed the peer may not
    /// know it (or the store was attached since), or that the sender no longer serves it.
    case store(StoreState)
    /// Entries of one store the receiver lacks, with the certificates that verify them.
    case delta(Delta)
    /// What the sender has of one store after applying a delta.
    case ack(Ack)
    /// Heartbeat, per connection: with the vectors of the stores that changed since the
    /// sender last told them (so peers learn what it has even when idle, and can collect
    /// tombstones); answered by `pong`.
    case ping([String: VersionVector])
    /// The answer to a ping, with the vectors of the stores that changed since the sender last
    /// told them (on a link with sparse heartbeats only the dialler pings, so the other side
    /// says what it has here; older builds send and read none).
    case pong([String: VersionVector])
    /// Entries of a delta the receiver did not apply, each with why, and the receiver's wall
    /// clock (milliseconds since 1970), so that a writer whose clock is ahead can tell. The
    /// rest of the delta was applied; the link stays up.
    case refused(Refusal)
    /// Device removals signed by the account CA, per connection: sent when the hellos'
    /// removals digests differ, and relayed to every peer when a device learns a new one.
    case removals([DeviceRemoval])
    /// The sender's certificate is within its renewal window: a peer holding the unlocked
    /// account CA answers with `certificate`; others ignore it.
    case renew
    /// A renewed certificate (DER) for the receiver's own key, issued by the account CA.
    case certificate(Data)
    /// The devices the sender has a session with now, besides the receiver (32-byte IDs), and
    /// the vectors of the stores that changed since the receiver was last told them: a relay
    /// does not pass on to the sender what those devices' own sessions bring it
    /// (docs/protocol.md, "Relays").
    case links(Links)

    package struct Links: Sendable, Equatable {
        package var devices: [Data]
        package var stores: [String: VersionVector]

        package init(devices: [Data], stores: [String: VersionVector] = [:]) {
            self.devices = devices
            self.stores = stores
        }
    }

    /// A renewed certificate in a `certificate` message is at most this many bytes.
    package static let maximumCertificateSize = 8192

    /// At most this many removal records are read from a `removals` message.
    package static let maximumRemovals = DeviceRemovals.maximumRecords

    /// At most this many refused entries are read from a `refused` message.
    package static let maximumRefusals = 1024

    /// The largest frame read before the peer's hello is verified, hello included: nothing
    /// bigger is even decoded from a peer that has not yet proved who it is. A hello lists at
    /// most ``maximumStores`` stores of at most ``maximumStoreIdentifierBytes`` each, about
    /// 180 KB.
    package static let maximumHelloSize = 256 * 1024

    /// At most this many stores in a hello, and served by one engine: a device with more
    /// would be a household of a thousand apps; a hello listing more is refused.
    package static let maximumStores = 1024

    /// A store identifier on the wire is at most this many bytes of UTF-8.
    package static let maximumStoreIdentifierBytes = 128

    /// At most this many entries in one delta. Senders split what a peer lacks into deltas of
    /// at most this many entries (and about a megabyte); a receiver refuses a bigger delta.
    package static let maximumDeltaEntries = 8192

    /// A vector in a message may name at most this many origins (`Replica.maximumVectorOrigins`).
    package static let maximumVectorOrigins = Replica.maximumVectorOrigins

    /// At most this many device IDs are read from a `store` message's `peers`: a household is
    /// a few devices, and a misbehaving peer must not grow our list of devices without bound.
    package static let maximumPeers = 64

    /// The digest of a set of known devices that a hello carries per store: the first 8 bytes
    /// of the SHA-256 of the 32-byte IDs, sorted and concatenated. Equal digests: nothing to tell.
    package static func peersDigest(_ devices: some Sequence<Data>) -> Data {
        Data(SHA256.hash(devices.sorted { $0.lexicographicallyPrecedes($1) }.reduce(into: Data()) { $0.append($1) }).prefix(8))
    }

    /// The digest of a vector that a hello carries per store: the first 8 bytes of the SHA-256
    /// of the vector's signing bytes. Equal digests: both sides have the same entries.
    package static func vectorDigest(_ vector: VersionVector) -> Data {
        Data(SHA256.hash(vector.signingBytes).prefix(8))
    }

    package struct Hello: Sendable, Equatable {
        /// One store the sender serves, as digests: a peer that serves it too and has the same
        /// digests has nothing to tell about it.
        package struct Store: Sendable, Equatable {
            package var identifier: String
            /// ``SyncMessage/vectorDigest(_:)`` of the sender's vector of the store.
            package var vectorDigest: Data
            /// ``SyncMessage/peersDigest(_:)`` of the devices the sender knows of in this store,
            /// itself included.
            package var peersDigest: Data

            package init(identifier: String, vectorDigest: Data, peersDigest: Data) {
                self.identifier = identifier
                self.vectorDigest = vectorDigest
                self.peersDigest = peersDigest
            }
        }

        package var protocolVersion: Int
        /// The account ID, hex.
        package var account: String
        /// The sender's device ID (32 bytes).
        package var device: Data
        /// The stores the sender serves, at most ``SyncMessage/maximumStores``.
        package var stores: [Store]
        /// The device's signature over ``signingBytes``.
        package var signature: Data
        /// ``DeviceRemovals/digest`` of the removals the sender knows; absent from builds that
        /// know no removals (they are sent none). Not signed: the records themselves are
        /// signed by the account CA, and TLS authenticates the sender.
        package var removalsDigest: Data?
        /// The sender understands `renew` and `certificate` (absent from older builds, which are
        /// sent neither). Not signed, like the digest.
        package var renews: Bool
        /// The sender understands `links` (absent from older builds, which are sent none and
        /// are relayed everything). Not signed, like the digest.
        package var links: Bool

        package init(protocolVersion: Int, account: String, device: Data, stores: [Store], signature: Data,
                    removalsDigest: Data? = nil, renews: Bool = false, links: Bool = false) {
            self.renews = renews
            self.links = links
            self.protocolVersion = protocolVersion
            self.account = account
            self.device = device
            self.stores = stores
            self.signature = signature
            self.removalsDigest = removalsDigest
        }

        /// `"hearth-hello-v3" 00 · u32 version · account · device · u32 count ·
        /// (store · vector digest · peers digest)*` (strings and data as u32 length + bytes).
        package var signingBytes: [UInt8] {
            var w = CanonicalWriter(capacity: 128 + stores.count * 48)
            w.writeBytes(Array("hearth-hello-v3".utf8) + [0])
            w.writeUInt32(UInt32(truncatingIfNeeded: protocolVersion))
            w.writeString(account)
            w.writeUInt32(UInt32(device.count))
            w.writeBytes(device)
            w.writeUInt32(UInt32(truncatingIfNeeded: stores.count))
            for store in stores {
                w.writeString(store.identifier)
                w.writeUInt32(UInt32(store.vectorDigest.count))
                w.writeBytes(store.vectorDigest)
                w.writeUInt32(UInt32(store.peersDigest.count))
                w.writeBytes(store.peersDigest)
            }
            return w.bytes
        }
    }

    /// What the sender has of one store, or that it left it.
    package struct StoreState: Sendable, Equatable {
        package var store: String
        /// The sender's vector of the store (absent when only its peers are told, or it left).
        package var vector: VersionVector?
        /// The other devices the sender knows of in this store (32-byte IDs), sent when the
        /// hello's peers digests differ: the receiver keeps tombstones until each has them.
        package var peers: [Data]?
        /// The sender no longer serves the store on this connection.
        package var left: Bool

        package init(store: String, vector: VersionVector? = nil, peers: [Data]? = nil, left: Bool = false) {
            self.store = store
            self.vector = vector
            self.peers = peers
            self.left = left
        }
    }

    package struct Delta: Sendable, Equatable {
        package var store: String
        package var entries: [Entry]
        /// DER device certificates of the signers.
        package var certificates: [Data]
        /// The sender's vector: what it had when it sent the delta. A claim, not a fact: the
        /// receiver's vector advances by the entries it applies, never by this.
        package var vector: VersionVector
        /// Entries of the frame that did not decode or break ``StoreLimits`` (only on receipt;
        /// never encoded). They are refused; the others apply.
        package var undecodable: [RefusedEntry]
        /// More deltas of the same batch follow (a big batch is split; the receiver's first
        /// download lasts until the last part).
        package var more: Bool

        package init(store: String, entries: [Entry], certificates: [Data], vector: VersionVector,
                    undecodable: [RefusedEntry] = [], more: Bool = false) {
            self.store = store
            self.entries = entries
            self.certificates = certificates
            self.vector = vector
            self.undecodable = undecodable
            self.more = more
        }
    }

    package struct Ack: Sendable, Equatable {
        package var store: String
        package var vector: VersionVector

        package init(store: String, vector: VersionVector) {
            self.store = store
            self.vector = vector
        }
    }

    package struct Refusal: Sendable, Equatable {
        package var store: String
        package var entries: [RefusedEntry]
        /// The receiver's wall clock when it refused them, in milliseconds since 1970.
        package var clock: UInt64

        package init(store: String, entries: [RefusedEntry], clock: UInt64) {
            self.store = store
            self.entries = entries
            self.clock = clock
        }
    }

    /// 3: one connection per pair of devices carries every store they share (store-tagged
    /// messages, a per-device hello with per-store digests). 2: entries refused one by one
    /// (`refused`), vectors advanced only by applied entries.
    package static let protocolVersion = 3

    /// A ping or a pong: traffic that keeps a link alive, not activity on it.
    package var isHeartbeat: Bool {
        switch self {
        case .ping, .pong: true
        default: false
        }
    }

    /// The store a message is about, if it is about one.
    package var storeIdentifier: String? {
        switch self {
        case .store(let state): state.store
        case .delta(let delta): delta.store
        case .ack(let ack): ack.store
        case .refused(let refusal): refusal.store
        case .hello, .ping, .pong, .removals, .renew, .certificate, .links: nil
        }
    }
}

/// Why a frame is not a valid message, or a peer broke the protocol.
package typealias SyncProtocolError = HearthError<SyncProtocolErrors>

/// The domain of ``SyncProtocolError``.
package enum SyncProtocolErrors: HearthErrorDomain {}

extension ErrorCode where Domain == SyncProtocolErrors {
    /// A frame is not a valid message, or a message breaks the protocol's rules (a second
    /// hello, a hello of another account, too many forged entries): the connection closes.
    package static var violation: Self { Self("violation") }
    /// The peer said nothing for longer than the link's timeout.
    package static var silent: Self { Self("silent") }
}

extension HearthError where Domain == SyncProtocolErrors {
    /// A protocol violation, explained by `reason`.
    package init(_ reason: String, file: String = #fileID, line: UInt = #line) {
        self.init(.violation, reason, file: file, line: line)
    }
}

extension SyncMessage {
    package var propertyList: PropertyListValue {
        switch self {
        case .hello(let h):
            let stores: [PropertyListValue] = h.stores.map { store in
                ["s": .string(store.identifier), "v": .data(store.vectorDigest), "p": .data(store.peersDigest)]
            }
            var fields: [String: PropertyListValue] = [
                "type": "hello", "protocol": .integer(Int64(h.protocolVersion)), "account": .string(h.account),
                "device": .data(h.device), "stores": .array(stores), "signature": .data(h.signature),
            ]
            if let digest = h.removalsDigest { fields["removals"] = .data(digest) }
            if h.renews { fields["renews"] = true }
            if h.links { fields["links"] = true }
            return .dictionary(fields)
        case .store(let s):
            var fields: [String: PropertyListValue] = ["type": "store", "store": .string(s.store)]
            if let vector = s.vector { fields["vector"] = vector.propertyList }
            if let peers = s.peers { fields["peers"] = .array(peers.map(PropertyListValue.data)) }
            if s.left { fields["left"] = true }
            return .dictionary(fields)
        case .delta(let d):
            var fields: [String: PropertyListValue] = [
                "type": "delta", "store": .string(d.store), "entries": .array(d.entries.map(\.propertyList)),
                "certificates": .array(d.certificates.map(PropertyListValue.data)), "vector": d.vector.propertyList,
            ]
            if d.more { fields["more"] = true }
            return .dictionary(fields)
        case .refused(let r):
            return ["type": "refused", "store": .string(r.store), "entries": .array(r.entries.map(\.propertyList)),
                    "clock": .integer(Int64(clamping: r.clock))]
        case .ack(let ack): return ["type": "ack", "store": .string(ack.store), "vector": ack.vector.propertyList]
        case .ping(let vectors):
            guard !vectors.isEmpty else { return ["type": "ping"] }
            return ["type": "ping", "stores": .dictionary(vectors.mapValues(\.propertyList))]
        case .pong(let vectors):
            guard !vectors.isEmpty else { return ["type": "pong"] }
            return ["type": "pong", "stores": .dictionary(vectors.mapValues(\.propertyList))]
        case .removals(let records): return ["type": "removals", "records": .array(records.map(\.propertyList))]
        case .renew: return ["type": "renew"]
        case .certificate(let der): return ["type": "certificate", "certificate": .data(der)]
        case .links(let links):
            var fields: [String: PropertyListValue] = ["type": "links", "devices": .array(links.devices.map(PropertyListValue.data))]
            if !links.stores.isEmpty { fields["stores"] = .dictionary(links.stores.mapValues(\.propertyList)) }
            return .dictionary(fields)
        }
    }

    /// The frame payload.
    package func encoded() throws(PropertyListEncodingError) -> Data { try BinaryPropertyList.encode(propertyList) }

    /// Parses a frame payload.
    ///
    /// The message's envelope is read field by field; a delta's entries one by one (see
    /// `Entry.decode(_:in:key:)`), so an entry that is malformed or breaks ``StoreLimits``
    /// lands in ``Delta/undecodable`` instead of failing the frame. Anything else that is
    /// wrong with the frame throws.
    package init(decoding data: Data) throws(SyncProtocolError) {
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
            // Small messages: read whole, with the depth their fields need (a hello's stores and a
            // ping's vectors are 2 deep).
            if type == "hello", let stores = objects["stores"],
               let list = try reading({ () throws(PropertyListDecodingError) in try document.array(stores) }),
               list.count > Self.maximumStores {
                throw SyncProtocolError("hello: \(list.count) stores, more than \(Self.maximumStores)")
            }
            var fields: [String: PropertyListValue] = [:]
            for (name, object) in objects {
                fields[name] = try reading { () throws(PropertyListDecodingError) in try document.value(object, maximumDepth: 2) }
            }
            try self.init(propertyList: .dictionary(fields))
            return
        }
        guard let storeObject = objects["store"],
              let store = try reading({ () throws(PropertyListDecodingError) in try document.value(storeObject, maximumDepth: 0) }).stringValue else {
            throw SyncProtocolError("delta: store missing")
        }
        try Self.checkStore(store, in: "delta")
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
        self = .delta(Delta(store: store, entries: entries, certificates: ders, vector: vector, undecodable: undecodable, more: more))
    }

    /// A store identifier on the wire is not empty and at most ``maximumStoreIdentifierBytes``.
    private static func checkStore(_ store: String, in type: String) throws(SyncProtocolError) {
        guard !store.isEmpty, store.utf8.count <= maximumStoreIdentifierBytes else {
            throw SyncProtocolError("\(type): a store identifier of \(store.utf8.count) bytes (1 to \(maximumStoreIdentifierBytes))")
        }
    }

    /// A `stores` field of vectors by store (ping, links), if present.
    private static func vectors(_ field: PropertyListValue?, in type: String) throws(SyncProtocolError) -> [String: VersionVector] {
        guard let field else { return [:] }
        guard let list = field.dictionaryValue, list.count <= maximumStores else {
            throw SyncProtocolError("\(type): stores is not a dictionary of at most \(maximumStores) vectors")
        }
        var vectors: [String: VersionVector] = [:]
        for (name, item) in list {
            try checkStore(name, in: type)
            vectors[name] = try checked(VersionVector(propertyList: item), type)
        }
        return vectors
    }

    private static func checked(_ vector: VersionVector?, _ what: String) throws(SyncProtocolError) -> VersionVector {
        guard let vector else { throw SyncProtocolError("\(what): missing or malformed vector") }
        guard vector.counters.count <= maximumVectorOrigins else {
            throw SyncProtocolError("\(what): a vector of \(vector.counters.count) origins, more than \(maximumVectorOrigins)")
        }
        return vector
    }

    package init(propertyList value: PropertyListValue) throws(SyncProtocolError) {
        guard let fields = value.dictionaryValue, let type = fields["type"]?.stringValue else {
            throw SyncProtocolError("a message must be a dictionary with a type")
        }
        func store() throws(SyncProtocolError) -> String {
            guard let store = fields["store"]?.stringValue else { throw SyncProtocolError("\(type): store missing") }
            try Self.checkStore(store, in: type)
            return store
        }
        switch type {
        case "hello":
            guard let version = fields["protocol"]?.integerValue, let account = fields["account"]?.stringValue,
                  let device = fields["device"]?.dataValue, let signature = fields["signature"]?.dataValue else {
                throw SyncProtocolError("hello: a field is missing or of the wrong type")
            }
            // A hello of protocol 1 or 2 has no stores: it reads, so the version mismatch is what
            // the receiver reports.
            let items = fields["stores"]?.arrayValue ?? []
            guard items.count <= Self.maximumStores else {
                throw SyncProtocolError("hello: \(items.count) stores, more than \(Self.maximumStores)")
            }
            var stores: [Hello.Store] = []
            stores.reserveCapacity(items.count)
            var seen = Set<String>()
            for item in items {
                guard let entry = item.dictionaryValue, let identifier = entry["s"]?.stringValue,
                      let vector = entry["v"]?.dataValue, let peers = entry["p"]?.dataValue,
                      vector.count <= 32, peers.count <= 32 else {
                    throw SyncProtocolError("hello: a store is not {s, v, p}")
                }
                try Self.checkStore(identifier, in: "hello")
                guard seen.insert(identifier).inserted else { throw SyncProtocolError("hello: the store \(String(reflecting: identifier)) appears twice") }
                stores.append(Hello.Store(identifier: identifier, vectorDigest: vector, peersDigest: peers))
            }
            var removalsDigest: Data?
            if let field = fields["removals"] {
                guard let digest = field.dataValue, digest.count <= 32 else { throw SyncProtocolError("hello: removals is not a digest") }
                removalsDigest = digest
            }
            self = .hello(Hello(protocolVersion: Int(truncatingIfNeeded: version), account: account, device: device,
                                stores: stores, signature: signature, removalsDigest: removalsDigest,
                                renews: fields["renews"]?.boolValue ?? false, links: fields["links"]?.boolValue ?? false))
        case "store":
            let name = try store()
            let vector = try fields["vector"].map { field throws(SyncProtocolError) in try Self.checked(VersionVector(propertyList: field), "store") }
            var peers: [Data]?
            if let field = fields["peers"] {
                guard let list = field.arrayValue else { throw SyncProtocolError("store: peers is not an array") }
                // Items that are not device IDs are dropped; past the cap, the rest is not read.
                peers = list.prefix(Self.maximumPeers).compactMap(\.dataValue).filter { $0.count == 32 }
            }
            self = .store(StoreState(store: name, vector: vector, peers: peers, left: fields["left"]?.boolValue ?? false))
        case "delta":
            // Through the frame path, so that entries are read one by one in both.
            let payload: Data
            do { payload = try BinaryPropertyList.encode(value) } catch { throw SyncProtocolError("delta: \(error)") }
            try self.init(decoding: payload)
        case "ack":
            let name = try store()
            self = .ack(Ack(store: name, vector: try Self.checked(fields["vector"].flatMap(VersionVector.init(propertyList:)), "ack")))
        case "ping":
            self = .ping(try Self.vectors(fields["stores"], in: "ping"))
        case "links":
            guard let list = fields["devices"]?.arrayValue else { throw SyncProtocolError("links: devices missing") }
            // Items that are not device IDs are dropped; past the cap, the rest is not read.
            let devices = list.prefix(Self.maximumPeers).compactMap(\.dataValue).filter { $0.count == 32 }
            self = .links(Links(devices: devices, stores: try Self.vectors(fields["stores"], in: "links")))
        case "pong": self = .pong(try Self.vectors(fields["stores"], in: "pong"))
        case "refused":
            let name = try store()
            guard let list = fields["entries"]?.arrayValue, let clock = fields["clock"]?.integerValue else {
                throw SyncProtocolError("refused: entries or clock missing")
            }
            // Past the cap, the rest is not read; items that do not read are dropped.
            self = .refused(Refusal(store: name, entries: list.prefix(Self.maximumRefusals).compactMap(RefusedEntry.init(propertyList:)),
                                    clock: UInt64(clamping: clock)))
        case "removals":
            guard let list = fields["records"]?.arrayValue else { throw SyncProtocolError("removals: records missing") }
            // Past the cap, the rest is not read; records that do not read are dropped (and each
            // that reads is verified against the account CA before it counts).
            self = .removals(list.prefix(Self.maximumRemovals).compactMap(DeviceRemoval.init(propertyList:)))
        case "renew": self = .renew
        case "certificate":
            guard let der = fields["certificate"]?.dataValue, !der.isEmpty, der.count <= Self.maximumCertificateSize else {
                throw SyncProtocolError("certificate: missing, or over \(Self.maximumCertificateSize) bytes")
            }
            self = .certificate(der)
        default: throw SyncProtocolError("unknown message type \(String(reflecting: type))")
        }
    }
}
