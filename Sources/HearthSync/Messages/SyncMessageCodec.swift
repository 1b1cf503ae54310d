import Foundation
import HearthCore
import HearthIdentity

/// The wire encoding of ``SyncMessage``: each message as a binary property-list dictionary
/// (docs/protocol.md, "Messages"), and back, refusing what breaks the protocol's bounds
/// (``SyncMessage/maximumStores``, ``SyncMessage/maximumDeltaEntries``, …) with a
/// ``SyncProtocolError``. A codec is for the frames of one device, ``sender``: the delta entries
/// it signed travel without their signer.
struct SyncMessageCodec: Sendable {
    /// The sending device's 32-byte ID, or nil (a frame from no particular peer: the signer
    /// of every entry is written out).
    let sender: Data?

    init(sender: Data?) {
        self.sender = sender
    }

    /// The field names of protocol 4 (docs/protocol.md, "Messages"): one letter each, as every
    /// frame carries its names. The `t` field's values stay words.
    enum Field {
        static let type = "t", protocolVersion = "p", account = "a", stores = "s", removals = "r"
        static let store = "s", vector = "v", peers = "p", left = "l"
        static let entries = "e", certificates = "c", more = "m", clock = "w", devices = "d", vectors = "v"
        static let records = "r", certificate = "c", durable = "d", whole = "w"
    }

    /// The message as a property list; a delta leaves out the signer of the entries ``sender`` signed.
    func propertyList(of message: SyncMessage) -> PropertyListValue {
        func fields(_ type: String, _ fields: [String: PropertyListValue]) -> PropertyListValue {
            var fields = fields
            fields[Field.type] = .string(type)
            return .dictionary(fields)
        }
        func vectors(_ vectors: [String: VersionVector]) -> PropertyListValue {
            .dictionary(vectors.mapValues { .data($0.packed) })
        }
        switch message {
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
            if state.whole { items[Field.whole] = true }
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
        case .ack(let ack):
            var items: [String: PropertyListValue] = [Field.store: .string(ack.store), Field.vector: .data(ack.vector.packed)]
            if let durable = ack.durable { items[Field.durable] = .data(durable.packed) }
            return fields("ack", items)
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

    /// The frame payload.
    func encode(_ message: SyncMessage) throws(PropertyListEncodingError) -> Data {
        try BinaryPropertyList.encode(propertyList(of: message))
    }

    /// Parses a frame payload; ``sender`` signed the delta entries that name no signer.
    ///
    /// The message's envelope is read field by field; a delta's entries one by one (see
    /// `Entry.decode(_:in:key:fields:sender:)`), so an entry that is malformed or breaks
    /// ``StoreLimits`` lands in ``Delta/undecodable`` instead of failing the frame. Anything
    /// else that is wrong with the frame throws.
    func decode(_ data: Data) throws(SyncProtocolError) -> SyncMessage {
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
                return .hello(SyncMessage.Hello(protocolVersion: Int(truncatingIfNeeded: version), account: Data(), stores: []))
            }
            throw SyncProtocolError("a message must be a dictionary with a type")
        }
        guard type == "delta" else {
            // Small messages: read whole, with the depth their fields need (a hello's stores and a
            // ping's vectors are 2 deep).
            if type == "hello", let stores = objects[Field.stores],
               let list = try reading({ () throws(PropertyListDecodingError) in try document.array(stores) }),
               list.count > SyncMessage.maximumStores {
                throw SyncProtocolError("hello: \(list.count) stores, more than \(SyncMessage.maximumStores)")
            }
            var fields: [String: PropertyListValue] = [:]
            for (name, object) in objects {
                fields[name] = try reading { () throws(PropertyListDecodingError) in try document.value(object, maximumDepth: 2) }
            }
            return try message(fromPropertyList: .dictionary(fields))
        }
        guard let store = try scalar(Field.store)?.stringValue else { throw SyncProtocolError("delta: store missing") }
        try Self.checkStore(store, in: "delta")
        guard let entriesObject = objects[Field.entries],
              let list = try reading({ () throws(PropertyListDecodingError) in try document.array(entriesObject) }) else {
            throw SyncProtocolError("delta: entries missing")
        }
        guard list.count <= SyncMessage.maximumDeltaEntries else {
            throw SyncProtocolError("delta: \(list.count) entries, more than \(SyncMessage.maximumDeltaEntries) in one delta")
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
        return .delta(SyncMessage.Delta(store: store, entries: entries, certificates: ders, vector: vector, undecodable: undecodable, more: more))
    }

    /// A store identifier on the wire is not empty and at most ``SyncMessage/maximumStoreIdentifierBytes``.
    private static func checkStore(_ store: String, in type: String) throws(SyncProtocolError) {
        guard !store.isEmpty, store.utf8.count <= SyncMessage.maximumStoreIdentifierBytes else {
            throw SyncProtocolError("\(type): a store identifier of \(store.utf8.count) bytes (1 to \(SyncMessage.maximumStoreIdentifierBytes))")
        }
    }

    /// A packed vector field (``VersionVector/packed``).
    private static func vector(_ field: PropertyListValue?, in type: String) throws(SyncProtocolError) -> VersionVector {
        guard let data = field?.dataValue else { throw SyncProtocolError("\(type): vector missing or not data") }
        guard let vector = VersionVector(packed: data, maximumOrigins: SyncMessage.maximumVectorOrigins) else {
            throw SyncProtocolError("\(type): a malformed vector, or one of more than \(SyncMessage.maximumVectorOrigins) origins")
        }
        return vector
    }

    /// A field of packed vectors by store (ping, pong, links), if present.
    private static func vectors(_ field: PropertyListValue?, in type: String) throws(SyncProtocolError) -> [String: VersionVector] {
        guard let field else { return [:] }
        guard let list = field.dictionaryValue, list.count <= SyncMessage.maximumStores else {
            throw SyncProtocolError("\(type): stores is not a dictionary of at most \(SyncMessage.maximumStores) vectors")
        }
        var vectors: [String: VersionVector] = [:]
        for (name, item) in list {
            try checkStore(name, in: type)
            vectors[name] = try vector(item, in: type)
        }
        return vectors
    }

    /// Reads a message from its property list (``propertyList(of:)``).
    func message(fromPropertyList value: PropertyListValue) throws(SyncProtocolError) -> SyncMessage {
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
            guard items.count <= SyncMessage.maximumStores else {
                throw SyncProtocolError("hello: \(items.count) stores, more than \(SyncMessage.maximumStores)")
            }
            var stores: [SyncMessage.Hello.Store] = []
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
                          let inline = VersionVector(packed: packed, maximumOrigins: SyncMessage.Hello.maximumInlineOrigins) else {
                        throw SyncProtocolError("hello: the vector of \(String(reflecting: identifier)) is malformed or names more than \(SyncMessage.Hello.maximumInlineOrigins) origins")
                    }
                    inlineBytes += packed.count
                    guard inlineBytes <= SyncMessage.Hello.maximumInlineBytes else {
                        throw SyncProtocolError("hello: its vectors take more than \(SyncMessage.Hello.maximumInlineBytes) bytes")
                    }
                    vector = inline
                }
                stores.append(SyncMessage.Hello.Store(identifier: identifier, vectorDigest: Data(digests.prefix(8)),
                                          peersDigest: Data(digests.suffix(8)), vector: vector))
            }
            var removalsDigest: Data?
            if let field = fields[Field.removals] {
                guard let digest = field.dataValue, digest.count <= 32 else { throw SyncProtocolError("hello: removals is not a digest") }
                removalsDigest = digest
            }
            return .hello(SyncMessage.Hello(protocolVersion: Int(truncatingIfNeeded: version), account: account, stores: stores,
                                removalsDigest: removalsDigest))
        case "store":
            let name = try store()
            let vector = try fields[Field.vector].map { field throws(SyncProtocolError) in try Self.vector(field, in: "store") }
            var peers: [Data]?
            if let field = fields[Field.peers] {
                guard let list = field.arrayValue else { throw SyncProtocolError("store: peers is not an array") }
                // Items that are not device IDs are dropped; past the cap, the rest is not read.
                peers = list.prefix(SyncMessage.maximumPeers).compactMap(\.dataValue).filter { $0.count == 32 }
            }
            return .store(SyncMessage.StoreState(store: name, vector: vector, peers: peers, left: fields[Field.left]?.boolValue ?? false,
                                                 whole: vector != nil && fields[Field.whole]?.boolValue == true))
        case "delta":
            // Through the frame path, so that entries are read one by one in both.
            let payload: Data
            do { payload = try BinaryPropertyList.encode(value) } catch { throw SyncProtocolError("delta: \(error)") }
            return try decode(payload)
        case "ack":
            let durable = try fields[Field.durable].map { field throws(SyncProtocolError) in try Self.vector(field, in: "ack") }
            return .ack(SyncMessage.Ack(store: try store(), vector: try Self.vector(fields[Field.vector], in: "ack"), durable: durable))
        case "ping":
            return .ping(try Self.vectors(fields[Field.vectors], in: "ping"))
        case "pong": return .pong(try Self.vectors(fields[Field.vectors], in: "pong"))
        case "links":
            guard let list = fields[Field.devices]?.arrayValue else { throw SyncProtocolError("links: devices missing") }
            // Items that are not device IDs are dropped; past the cap, the rest is not read.
            let devices = list.prefix(SyncMessage.maximumPeers).compactMap(\.dataValue).filter { $0.count == 32 }
            return .links(SyncMessage.Links(devices: devices, stores: try Self.vectors(fields[Field.vectors], in: "links")))
        case "refused":
            let name = try store()
            guard let list = fields[Field.entries]?.arrayValue, let clock = fields[Field.clock]?.integerValue else {
                throw SyncProtocolError("refused: entries or clock missing")
            }
            // Past the cap, the rest is not read; items that do not read are dropped.
            return .refused(SyncMessage.Refusal(store: name, entries: list.prefix(SyncMessage.maximumRefusals).compactMap(RefusedEntry.init(propertyList:)),
                                    clock: UInt64(clamping: clock)))
        case "removals":
            guard let list = fields[Field.records]?.arrayValue else { throw SyncProtocolError("removals: records missing") }
            // Past the cap, the rest is not read; records that do not read are dropped (and each
            // that reads is verified against the account CA before it counts).
            return .removals(list.prefix(SyncMessage.maximumRemovals).compactMap(DeviceRemoval.init(propertyList:)))
        case "renew": return .renew
        case "certificate":
            guard let der = fields[Field.certificate]?.dataValue, !der.isEmpty, der.count <= SyncMessage.maximumCertificateSize else {
                throw SyncProtocolError("certificate: missing, or over \(SyncMessage.maximumCertificateSize) bytes")
            }
            return .certificate(der)
        default: throw SyncProtocolError("unknown message type \(String(reflecting: type))")
        }
    }
}
