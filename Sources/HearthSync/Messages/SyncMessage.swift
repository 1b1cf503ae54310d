import Foundation
import HearthCore
import HearthIdentity

/// The messages of the sync protocol, each one frame: a binary property list dictionary
/// with a `t` (type) field. docs/protocol.md documents every field.
///
/// Since protocol 3, one connection carries every store two devices share: the hello is per
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
            /// The sender's vector itself, when small (at most ``Hello/maximumInlineOrigins``
            /// origins, within the hello's ``Hello/maximumInlineBytes``): a peer whose digest
            /// differs then knows it at once, and neither sends a `store` message for it. On a
            /// reconnection that saves a round trip and two frames.
            package var vector: VersionVector?

            package init(identifier: String, vectorDigest: Data, peersDigest: Data, vector: VersionVector? = nil) {
                self.identifier = identifier
                self.vectorDigest = vectorDigest
                self.peersDigest = peersDigest
                self.vector = vector
            }
        }

        /// A store's vector goes in the hello only if it names at most this many origins.
        package static let maximumInlineOrigins = 8
        /// The vectors a hello carries take at most this many bytes together, so that a hello of
        /// 1,024 stores still fits the 256 KiB read before the hello (about 180 KB of them
        /// without vectors).
        package static let maximumInlineBytes = 32 * 1024

        package var protocolVersion: Int
        /// The account ID (32 bytes).
        ///
        /// Protocol 4 dropped the device ID and the signature protocol 3 carried: TLS 1.3 has
        /// authenticated the sender's device key for the whole connection before the hello is
        /// read (its CertificateVerify signs the handshake), so the hello is that device's
        /// already; the signature proved it a second time, at an Ed25519 signature and
        /// verification per connection.
        package var account: Data
        /// The stores the sender serves, at most ``SyncMessage/maximumStores``.
        package var stores: [Store]
        /// ``DeviceRemovals/digest`` of the removals the sender knows (every device sends one;
        /// a hello without it is sent no removals).
        package var removalsDigest: Data?
        /// The sender understands `renew` and `certificate`: every protocol 4 device does (not on
        /// the wire); a session's rules still allow for a peer that does not.
        package var renews: Bool
        /// The sender understands `links`: every protocol 4 device does (not on the wire).
        package var links: Bool

        package init(protocolVersion: Int = SyncMessage.protocolVersion, account: Data, stores: [Store],
                    removalsDigest: Data? = nil, renews: Bool = true, links: Bool = true) {
            self.renews = renews
            self.links = links
            self.protocolVersion = protocolVersion
            self.account = account
            self.stores = stores
            self.removalsDigest = removalsDigest
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

    /// 4: the compact wire (one-letter field names, packed vectors, raw account ID, no signer
    /// for the sender's own entries, an unsigned hello). 3: one connection per pair of devices
    /// carries every store they share (store-tagged messages, a per-device hello with per-store
    /// digests). 2: entries refused one by one (`refused`), vectors advanced only by applied entries.
    package static let protocolVersion = 4

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
    /// The field names of protocol 4 (docs/protocol.md, "Messages"): one letter each, as every
    /// frame carries its names. The `t` field's values stay words.
    enum Field {
        static let type = "t", protocolVersion = "p", account = "a", stores = "s", removals = "r"
        static let store = "s", vector = "v", peers = "p", left = "l"
        static let entries = "e", certificates = "c", more = "m", clock = "w", devices = "d", vectors = "v"
        static let records = "r", certificate = "c"
    }

    /// The message as a property list, as ``propertyList(sender:)`` with no sender.
    package var propertyList: PropertyListValue { propertyList(sender: nil) }

    /// The message as a property list; a delta leaves out the signer of the entries `sender`
    /// (the sending device's 32-byte ID) signed.
    package func propertyList(sender: Data?) -> PropertyListValue {
        func fields(_ type: String, _ fields: [String: PropertyListValue]) -> PropertyListValue {
            var fields = fields
            fields[Field.type] = .string(type)
            return .dictionary(fields)
        }
        func vectors(_ vectors: [String: VersionVector]) -> PropertyListValue {
            .dictionary(vectors.mapValues { .data($0.packed) })
        }
        switch self {
        case .hello(let h):
            let stores: [PropertyListValue] = h.stores.map { store in
                let listing: [PropertyListValue] = [.string(store.identifier), .data(store.vectorDigest + store.peersDigest)]
                return .array(store.vector.map { listing + [.data($0.packed)] } ?? listing)
            }
            var items: [String: PropertyListValue] = [
                Field.protocolVersion: .integer(Int64(h.protocolVersion)), Field.account: .data(h.account), Field.stores: .array(stores),
            ]
            if let digest = h.removalsDigest { items[Field.removals] = .data(digest) }
            return fields("hello", items)
        case .store(let state):
            var items: [String: PropertyListValue] = [Field.store: .string(state.store)]
            if let vector = state.vector { items[Field.vector] = .data(vector.packed) }
            if let peers = state.peers { items[Field.peers] = .array(peers.map(PropertyListValue.data)) }
            if state.left { items[Field.left] = true }
            return fields("store", items)
        case .delta(let d):
            var items: [String: PropertyListValue] = [
                Field.store: .string(d.store), Field.vector: .data(d.vector.packed),
                Field.entries: .array(d.entries.map { $0.propertyList(fields: .wire, sender: sender) }),
            ]
            if !d.certificates.isEmpty { items[Field.certificates] = .array(d.certificates.map(PropertyListValue.data)) }
            if d.more { items[Field.more] = true }
            return fields("delta", items)
        case .refused(let r):
            return fields("refused", [Field.store: .string(r.store), Field.entries: .array(r.entries.map(\.propertyList)),
                                      Field.clock: .integer(Int64(clamping: r.clock))])
        case .ack(let ack): return fields("ack", [Field.store: .string(ack.store), Field.vector: .data(ack.vector.packed)])
        case .ping(let stores): return fields("ping", stores.isEmpty ? [:] : [Field.vectors: vectors(stores)])
        case .pong(let stores): return fields("pong", stores.isEmpty ? [:] : [Field.vectors: vectors(stores)])
        case .removals(let records): return fields("removals", [Field.records: .array(records.map(\.propertyList))])
        case .renew: return fields("renew", [:])
        case .certificate(let der): return fields("certificate", [Field.certificate: .data(der)])
        case .links(let links):
            var items: [String: PropertyListValue] = [Field.devices: .array(links.devices.map(PropertyListValue.data))]
            if !links.stores.isEmpty { items[Field.vectors] = vectors(links.stores) }
            return fields("links", items)
        }
    }

    /// The frame payload; `sender` as in ``propertyList(sender:)``.
    package func encoded(sender: Data? = nil) throws(PropertyListEncodingError) -> Data {
        try BinaryPropertyList.encode(propertyList(sender: sender))
    }

    /// Parses a frame payload; `sender` (the peer's 32-byte device ID) signed the delta
    /// entries that name no signer.
    ///
    /// The message's envelope is read field by field; a delta's entries one by one (see
    /// `Entry.decode(_:in:key:fields:sender:)`), so an entry that is malformed or breaks
    /// ``StoreLimits`` lands in ``Delta/undecodable`` instead of failing the frame. Anything
    /// else that is wrong with the frame throws.
    package init(decoding data: Data, sender: Data? = nil) throws(SyncProtocolError) {
        func reading<T>(_ step: () throws(PropertyListDecodingError) -> T) throws(SyncProtocolError) -> T {
            do { return try step() } catch { throw SyncProtocolError("malformed frame: \(error)") }
        }
        var document = try reading { () throws(PropertyListDecodingError) in try BinaryPropertyList.Document(data) }
        guard let pairs = try reading({ () throws(PropertyListDecodingError) in try document.dictionary(document.root) }) else {
            throw SyncProtocolError("a message must be a dictionary with a type")
        }
        var objects = [String: BinaryPropertyList.Document.Object](minimumCapacity: pairs.count)   // sized once, not regrown
        for (name, object) in pairs where objects.updateValue(object, forKey: name) != nil {
            throw SyncProtocolError("malformed frame: the field \(name) appears twice")
        }
        func scalar(_ name: String) throws(SyncProtocolError) -> PropertyListValue? {
            guard let object = objects[name] else { return nil }
            return try reading { () throws(PropertyListDecodingError) in try document.value(object, maximumDepth: 0) }
        }
        guard let type = try scalar(Field.type)?.stringValue else {
            // Protocols 1 to 3 named the field `type`: their hello reads, as far as its version,
            // so that the mismatch is what the receiver reports.
            if try scalar("type")?.stringValue == "hello", let version = try scalar("protocol")?.integerValue {
                self = .hello(Hello(protocolVersion: Int(truncatingIfNeeded: version), account: Data(), stores: []))
                return
            }
            throw SyncProtocolError("a message must be a dictionary with a type")
        }
        guard type == "delta" else {
            // Small messages: read whole, with the depth their fields need (a hello's stores and a
            // ping's vectors are 2 deep).
            if type == "hello", let stores = objects[Field.stores],
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
        guard let store = try scalar(Field.store)?.stringValue else { throw SyncProtocolError("delta: store missing") }
        try Self.checkStore(store, in: "delta")
        guard let entriesObject = objects[Field.entries],
              let list = try reading({ () throws(PropertyListDecodingError) in try document.array(entriesObject) }) else {
            throw SyncProtocolError("delta: entries missing")
        }
        guard list.count <= Self.maximumDeltaEntries else {
            throw SyncProtocolError("delta: \(list.count) entries, more than \(Self.maximumDeltaEntries) in one delta")
        }
        var more = false
        if let flag = try scalar(Field.more) {
            guard let value = flag.boolValue else { throw SyncProtocolError("delta: more is not a Boolean") }
            more = value
        }
        var ders: [Data] = []
        if let certificatesObject = objects[Field.certificates] {
            let certificates = try reading { () throws(PropertyListDecodingError) in try document.value(certificatesObject, maximumDepth: 1) }
            guard let items = certificates.arrayValue else { throw SyncProtocolError("delta: certificates is not an array") }
            ders = items.compactMap(\.dataValue)
            guard ders.count == items.count else { throw SyncProtocolError("delta: a certificate is not data") }
        }
        let vector = try Self.vector(try scalar(Field.vector), in: "delta")
        var entries: [Entry] = []
        entries.reserveCapacity(list.count)
        var undecodable: [RefusedEntry] = []
        for object in list {
            switch Entry.decode(object, in: &document, fields: .wire, sender: sender) {
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

    /// A packed vector field (``VersionVector/packed``).
    private static func vector(_ field: PropertyListValue?, in type: String) throws(SyncProtocolError) -> VersionVector {
        guard let data = field?.dataValue else { throw SyncProtocolError("\(type): vector missing or not data") }
        guard let vector = VersionVector(packed: data, maximumOrigins: maximumVectorOrigins) else {
            throw SyncProtocolError("\(type): a malformed vector, or one of more than \(maximumVectorOrigins) origins")
        }
        return vector
    }

    /// A field of packed vectors by store (ping, pong, links), if present.
    private static func vectors(_ field: PropertyListValue?, in type: String) throws(SyncProtocolError) -> [String: VersionVector] {
        guard let field else { return [:] }
        guard let list = field.dictionaryValue, list.count <= maximumStores else {
            throw SyncProtocolError("\(type): stores is not a dictionary of at most \(maximumStores) vectors")
        }
        var vectors: [String: VersionVector] = [:]
        for (name, item) in list {
            try checkStore(name, in: type)
            vectors[name] = try vector(item, in: type)
        }
        return vectors
    }

    /// Reads a message from its property list (``propertyList(sender:)``).
    package init(propertyList value: PropertyListValue, sender: Data? = nil) throws(SyncProtocolError) {
        guard let fields = value.dictionaryValue, let type = fields[Field.type]?.stringValue else {
            throw SyncProtocolError("a message must be a dictionary with a type")
        }
        func store() throws(SyncProtocolError) -> String {
            guard let store = fields[Field.store]?.stringValue else { throw SyncProtocolError("\(type): store missing") }
            try Self.checkStore(store, in: type)
            return store
        }
        switch type {
        case "hello":
            guard let version = fields[Field.protocolVersion]?.integerValue, let account = fields[Field.account]?.dataValue else {
                throw SyncProtocolError("hello: a field is missing or of the wrong type")
            }
            let items = fields[Field.stores]?.arrayValue ?? []
            guard items.count <= Self.maximumStores else {
                throw SyncProtocolError("hello: \(items.count) stores, more than \(Self.maximumStores)")
            }
            var stores: [Hello.Store] = []
            stores.reserveCapacity(items.count)
            var seen = Set<String>()
            var inlineBytes = 0
            for item in items {
                guard let listing = item.arrayValue, listing.count == 2 || listing.count == 3, let identifier = listing[0].stringValue,
                      let digests = listing[1].dataValue, digests.count == 16 else {
                    throw SyncProtocolError("hello: a store is not [identifier, 16 bytes of digests, vector?]")
                }
                try Self.checkStore(identifier, in: "hello")
                guard seen.insert(identifier).inserted else { throw SyncProtocolError("hello: the store \(String(reflecting: identifier)) appears twice") }
                var vector: VersionVector?
                if listing.count == 3 {
                    guard let packed = listing[2].dataValue,
                          let inline = VersionVector(packed: packed, maximumOrigins: Hello.maximumInlineOrigins) else {
                        throw SyncProtocolError("hello: the vector of \(String(reflecting: identifier)) is malformed or names more than \(Hello.maximumInlineOrigins) origins")
                    }
                    inlineBytes += packed.count
                    guard inlineBytes <= Hello.maximumInlineBytes else {
                        throw SyncProtocolError("hello: its vectors take more than \(Hello.maximumInlineBytes) bytes")
                    }
                    vector = inline
                }
                stores.append(Hello.Store(identifier: identifier, vectorDigest: Data(digests.prefix(8)),
                                          peersDigest: Data(digests.suffix(8)), vector: vector))
            }
            var removalsDigest: Data?
            if let field = fields[Field.removals] {
                guard let digest = field.dataValue, digest.count <= 32 else { throw SyncProtocolError("hello: removals is not a digest") }
                removalsDigest = digest
            }
            self = .hello(Hello(protocolVersion: Int(truncatingIfNeeded: version), account: account, stores: stores,
                                removalsDigest: removalsDigest))
        case "store":
            let name = try store()
            let vector = try fields[Field.vector].map { field throws(SyncProtocolError) in try Self.vector(field, in: "store") }
            var peers: [Data]?
            if let field = fields[Field.peers] {
                guard let list = field.arrayValue else { throw SyncProtocolError("store: peers is not an array") }
                // Items that are not device IDs are dropped; past the cap, the rest is not read.
                peers = list.prefix(Self.maximumPeers).compactMap(\.dataValue).filter { $0.count == 32 }
            }
            self = .store(StoreState(store: name, vector: vector, peers: peers, left: fields[Field.left]?.boolValue ?? false))
        case "delta":
            // Through the frame path, so that entries are read one by one in both.
            let payload: Data
            do { payload = try BinaryPropertyList.encode(value) } catch { throw SyncProtocolError("delta: \(error)") }
            try self.init(decoding: payload, sender: sender)
        case "ack":
            self = .ack(Ack(store: try store(), vector: try Self.vector(fields[Field.vector], in: "ack")))
        case "ping":
            self = .ping(try Self.vectors(fields[Field.vectors], in: "ping"))
        case "pong": self = .pong(try Self.vectors(fields[Field.vectors], in: "pong"))
        case "links":
            guard let list = fields[Field.devices]?.arrayValue else { throw SyncProtocolError("links: devices missing") }
            // Items that are not device IDs are dropped; past the cap, the rest is not read.
            let devices = list.prefix(Self.maximumPeers).compactMap(\.dataValue).filter { $0.count == 32 }
            self = .links(Links(devices: devices, stores: try Self.vectors(fields[Field.vectors], in: "links")))
        case "refused":
            let name = try store()
            guard let list = fields[Field.entries]?.arrayValue, let clock = fields[Field.clock]?.integerValue else {
                throw SyncProtocolError("refused: entries or clock missing")
            }
            // Past the cap, the rest is not read; items that do not read are dropped.
            self = .refused(Refusal(store: name, entries: list.prefix(Self.maximumRefusals).compactMap(RefusedEntry.init(propertyList:)),
                                    clock: UInt64(clamping: clock)))
        case "removals":
            guard let list = fields[Field.records]?.arrayValue else { throw SyncProtocolError("removals: records missing") }
            // Past the cap, the rest is not read; records that do not read are dropped (and each
            // that reads is verified against the account CA before it counts).
            self = .removals(list.prefix(Self.maximumRemovals).compactMap(DeviceRemoval.init(propertyList:)))
        case "renew": self = .renew
        case "certificate":
            guard let der = fields[Field.certificate]?.dataValue, !der.isEmpty, der.count <= Self.maximumCertificateSize else {
                throw SyncProtocolError("certificate: missing, or over \(Self.maximumCertificateSize) bytes")
            }
            self = .certificate(der)
        default: throw SyncProtocolError("unknown message type \(String(reflecting: type))")
        }
    }
}
