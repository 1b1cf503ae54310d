import Foundation

/// The on-disk form of a ``Replica``: a binary property list that standard tools read.
///
/// ```text
/// {
///   format: "hearth-replica", version: 2,
///   storeIdentifier: String, account: String ("" when signed out),
///   replica: Data(16), clock: Int, sequence: Int,
///   vector: { <origin hex>: Int },
///   peers: { <device ID hex>: { <origin hex>: Int } },   // what each peer last acknowledged
///   synced: Bool,                                        // the initial sync has happened
///   certificates: { <device ID hex>: Data },             // DER certificates of the entries' signers
///   entries: [ { key: String, value: <any>, timestamp: Int, origin: Data(16), sequence: Int,
///                signer: Data, signature: Data } ],      // no `value`: a tombstone
///   collected: Int,                                      // the highest stamp of a tombstone collected
///   superseded: [ { key: String, timestamps: [Int] } ],  // per key, stamps seen on entries not current
///   wantsWhole: Bool,                                    // only when true: peers' whole store wanted
///   displaced: [ <entry, as in entries> ]                // only when any: what remote entries replaced,
///                                                        // per key latest first (at most two)
/// }
/// ```
///
/// `collected` and `superseded` (``Replica/history``, a ``StampHistory``) came
/// after version 2 without a new version: a file without them (of an earlier build) opens as
/// if they were zero and empty, and an earlier build ignores them. What an earlier build loses
/// is only what they guard against: a write stamped before a removal collected, or a re-stamped
/// entry losing to a write it had beaten, after a clock that was hours off (docs/architecture.md).
/// So did `wantsWhole` (``Replica/wantsWhole``, issue 28): an earlier build ignores it, and so
/// does not ask its peers again for what a removed device's dropped writes had replaced. And
/// `displaced` (``Replica/displaced``): an earlier build ignores it, and so cannot restore what
/// a removed device's dropped write had replaced; one that fails to read is left out (logged
/// with the set-aside entries), as the replica works without it.
///
/// Version 2 keeps the entries in an array, each with its `key`, where version 1 kept them in
/// a dictionary by key: a property-list dictionary read into Swift merges keys that differ only
/// in Unicode normalisation, and store keys are exact (see ``StoreKey``). Version 1 files are
/// still read (their keys read exactly too), and written back as version 2.
///
/// `python3 -c 'import plistlib,sys; print(plistlib.load(open(sys.argv[1],"rb")))' FILE`
/// prints it.
package enum ReplicaFile {
    package static let format = "hearth-replica"
    package static let version: Int64 = 2

    /// What a file holds besides the replica.
    package struct Header: Sendable, Equatable {
        package var storeIdentifier: String
        /// The account ID, or `""` for the signed-out (local) replica.
        package var account: String

        package init(storeIdentifier: String, account: String) {
            self.storeIdentifier = storeIdentifier
            self.account = account
        }
    }

    /// A file read back.
    package struct Contents: Sendable {
        package var replica: Replica
        package var header: Header
        /// Entries that could not be loaded, each with why; the rest of the file loaded.
        package var setAside: [RefusedEntry]
    }

    /// The file as a property list: what ``encode(_:header:)`` writes, read back (by
    /// ``BinaryPropertyList/decode(_:)``, `plistlib` or `plutil`).
    package static func document(_ replica: Replica, header: Header) -> PropertyListValue {
        var fields = headerFields(replica, header: header)
        fields["entries"] = .array(replica.entries.keys.sorted().map { replica.entries[$0]!.propertyList })
        return .dictionary(fields)
    }

    /// Every top-level field but `entries`.
    private static func headerFields(_ replica: Replica, header: Header) -> [String: PropertyListValue] {
        var fields: [String: PropertyListValue] = [
            "format": .string(format),
            "version": .integer(version),
            "storeIdentifier": .string(header.storeIdentifier),
            "account": .string(header.account),
            "replica": .data(Data(replica.id.bytes)),
            "clock": .integer(Int64(bitPattern: replica.clock.last.rawValue)),
            "sequence": .integer(Int64(bitPattern: replica.sequence)),
            "vector": replica.vector.propertyList,
            "peers": .dictionary(replica.peerVectors.mapValues(\.propertyList)),
            "synced": .bool(replica.hasSynced),
            "certificates": .dictionary(Dictionary(uniqueKeysWithValues: replica.certificatesInUse.map { (Hex.encode($0.key), .data($0.value)) })),
            "collected": .integer(Int64(bitPattern: replica.history.collected.rawValue)),
            "superseded": .array(replica.history.superseded.sorted { $0.key < $1.key }.map {
                .dictionary(["key": .string($0.key.string),
                             "timestamps": .array($0.value.map { .integer(Int64(bitPattern: $0.rawValue)) })])
            }),
        ]
        if replica.wantsWhole { fields["wantsWhole"] = .bool(true) }
        if !replica.displaced.isEmpty { fields["displaced"] = .array(displacedEntries(of: replica).map(\.propertyList)) }
        return fields
    }

    /// ``document(_:header:)`` as a binary property list.
    ///
    /// A store is saved whole, at most once a second while changes come, so this is written
    /// straight from the replica, with no property-list tree and without hashing every scalar
    /// to share it (a fifth of the household simulator's time went to that). Only what repeats
    /// is stored once: names, each origin (its bytes and its hex digits) and each signer; keys,
    /// stamps, counters, signatures and values are objects of their own. So the bytes are not
    /// ``BinaryPropertyList/encode(_:)``'s of the same document (which shares every equal
    /// scalar), but every reader reads the same value from both, and the same replica and
    /// header give the same bytes every time.
    package static func encode(_ replica: Replica, header: Header) throws(PropertyListEncodingError) -> Data {
        var writer = ReplicaFileWriter()
        return try writer.write(replica, header: header)
    }

    /// ``Replica/displaced`` as saved: by key, at most two per key (only when any).
    static func displacedEntries(of replica: Replica) -> [Entry] {
        replica.displaced.keys.sorted().flatMap { replica.displaced[$0]!.prefix(2) }
    }

    /// Reads a file's bytes back.
    ///
    /// The header is all or nothing: anything that is not exactly a replica file of a known
    /// version throws ``PersistenceError/Code/damaged`` with the reason. Entries are read one by
    /// one: one that is malformed or breaks ``StoreLimits`` is left out and listed in
    /// ``Contents/setAside``, and the others load. Counters of the vector are then what the
    /// loaded entries justify, so peers that hold a set-aside entry send it again.
    package static func decode(_ data: Data, path: String) throws(PersistenceError) -> Contents {
        func damaged(_ reason: String) -> PersistenceError { PersistenceError(.damaged, path: path, reason: reason) }
        /// Runs one step of reading the envelope; a decoding failure makes the file damaged.
        func reading<T>(_ what: String, _ step: () throws(PropertyListDecodingError) -> T) throws(PersistenceError) -> T {
            do { return try step() } catch { throw damaged("\(what): \(error)") }
        }
        var document = try reading("the file") { () throws(PropertyListDecodingError) in try BinaryPropertyList.Document(data) }
        guard let fields = try reading("the top level", { () throws(PropertyListDecodingError) in try document.dictionary(document.root) }) else {
            throw damaged("the top level is not a dictionary")
        }
        var root: [String: BinaryPropertyList.Document.Object] = [:]
        for (name, object) in fields where root.updateValue(object, forKey: name) != nil {
            throw damaged("the header field \(name) appears twice")
        }
        /// A header field: at most `depth` levels of nesting.
        func field(_ name: String, depth: Int = 0) throws(PersistenceError) -> PropertyListValue? {
            guard let object = root[name] else { return nil }
            return try reading(name) { () throws(PropertyListDecodingError) in try document.value(object, maximumDepth: depth) }
        }
        guard try field("format")?.stringValue == format else { throw damaged("not a Hearth replica file") }
        let fileVersion = try field("version")?.integerValue
        guard fileVersion == 1 || fileVersion == version else {
            throw damaged("unsupported version \(fileVersion.map(String.init) ?? "none")")
        }
        guard let storeIdentifier = try field("storeIdentifier")?.stringValue,
              let account = try field("account")?.stringValue,
              let idData = try field("replica")?.dataValue, let id = ReplicaID(bytes: idData),
              let clock = try field("clock")?.integerValue,
              let sequence = try field("sequence")?.integerValue,
              let vectorField = try field("vector", depth: 1),
              let entriesObject = root["entries"] else {
            throw damaged("a header field is missing or of the wrong type")
        }
        guard var vector = VersionVector(propertyList: vectorField) else {
            throw damaged("the version vector is malformed")
        }
        var peers: [String: VersionVector] = [:]
        for (device, fields) in try field("peers", depth: 2)?.dictionaryValue ?? [:] {
            guard let peerVector = VersionVector(propertyList: fields) else { throw damaged("peer \(device)'s vector is malformed") }
            peers[device] = peerVector
        }
        // Absent in files of earlier builds: then relays learn the certificates again from peers.
        var certificates: [Data: Data] = [:]
        for (signer, der) in try field("certificates", depth: 1)?.dictionaryValue ?? [:] {
            guard let signerBytes = Hex.decode(signer), let der = der.dataValue else {
                throw damaged("the certificate of \(String(reflecting: signer)) is malformed")
            }
            certificates[Data(signerBytes)] = der
        }

        // Absent in files of earlier builds: nothing collected or superseded is known.
        var collected = HLCTimestamp.zero
        if let field = try field("collected") {
            guard let raw = field.integerValue else { throw damaged("collected is not an integer") }
            collected = HLCTimestamp(rawValue: UInt64(bitPattern: raw))
        }
        var superseded: [StoreKey: [HLCTimestamp]] = [:]
        if let field = try field("superseded", depth: 3) {
            guard let list = field.arrayValue else { throw damaged("superseded is not an array") }
            for item in list {
                guard let pair = item.dictionaryValue, let key = pair["key"]?.stringValue,
                      let raws = pair["timestamps"]?.arrayValue?.compactMap(\.integerValue),
                      raws.count == pair["timestamps"]?.arrayValue?.count else {
                    throw damaged("an item of superseded is malformed: \(item)")
                }
                superseded[StoreKey(key)] = raws.map { HLCTimestamp(rawValue: UInt64(bitPattern: $0)) }
            }
        }

        // The entries: an array (version 2) or a dictionary by key (version 1).
        var items: [(object: BinaryPropertyList.Document.Object, key: StoreKey?)] = []
        if fileVersion == 1 {
            guard let pairs = try reading("entries", { () throws(PropertyListDecodingError) in try document.dictionary(entriesObject) }) else {
                throw damaged("entries is not a dictionary")
            }
            items = pairs.map { ($0.value, StoreKey($0.key)) }
        } else {
            guard let list = try reading("entries", { () throws(PropertyListDecodingError) in try document.array(entriesObject) }) else {
                throw damaged("entries is not an array")
            }
            items = list.map { ($0, nil) }
        }
        var entries: [StoreKey: Entry] = [:]
        entries.reserveCapacity(items.count)
        var setAside: [RefusedEntry] = []
        for (object, key) in items {
            switch Entry.decode(object, in: &document, key: key) {
            case .success(let entry):
                if let other = entries[entry.key] {
                    let (kept, dropped) = entry.wins(over: other) ? (entry, other) : (other, entry)
                    entries[entry.key] = kept
                    setAside.append(RefusedEntry(dropped, reason: .malformed, detail: "the key appears twice; the later write is kept"))
                } else {
                    entries[entry.key] = entry
                }
            case .failure(let refused):
                setAside.append(refused)
            }
        }
        // A set-aside entry must not stay covered: peers that hold a good copy send it again.
        for origin in Set(setAside.compactMap(\.origin)) {
            vector = VersionVector(vector.counters.filter { $0.key != origin })
        }
        // Absent in files of earlier builds, and optional: one that does not load is set aside.
        var displaced: [StoreKey: [Entry]] = [:]
        if let object = root["displaced"], let list = try? document.array(object) {
            for item in list {
                switch Entry.decode(item, in: &document, key: nil) {
                case .success(let entry) where displaced[entry.key, default: []].count < 2: displaced[entry.key, default: []].append(entry)
                case .success: break
                case .failure(let refused): setAside.append(refused)
                }
            }
        }
        var replica = Replica(id: id, clock: HybridLogicalClock(last: HLCTimestamp(rawValue: UInt64(bitPattern: clock))),
                              sequence: UInt64(bitPattern: sequence), vector: vector, entries: entries, peerVectors: peers,
                              certificates: certificates, history: StampHistory(collected: collected, superseded: superseded),
                              displaced: displaced)
        replica.hasSynced = try field("synced")?.boolValue ?? false
        replica.wantsWhole = try field("wantsWhole")?.boolValue ?? false
        return Contents(replica: replica, header: Header(storeIdentifier: storeIdentifier, account: account), setAside: setAside)
    }
}

/// Writes ``ReplicaFile/encode(_:header:)``'s document, objects sharing only what repeats.
private struct ReplicaFileWriter {
    var out = BinaryPropertyListWriter()
    /// Each origin's hex digits (a key of the vector and of each peer's) and its bytes (the
    /// `origin` of its entries), stored once.
    var originDigits: [ReplicaID: Int] = [:]
    var originBytes: [ReplicaID: Int] = [:]
    /// Each signer's device ID, stored once.
    var signers: [Data: Int] = [:]

    mutating func write(_ replica: Replica, header: ReplicaFile.Header) throws(PropertyListEncodingError) -> Data {
        out.objects.reserveCapacity(64 + replica.entries.count * 10)
        // The root first: the trailer names object 0 as the root.
        let root = out.reserve()
        // The entries first, which tell the certificates in use (their signers').
        let entries = try self.entries(of: replica)
        // Written with the entries, before the certificates: their signers' count as in use.
        let displaced = replica.displaced.isEmpty ? nil : try self.entries(ReplicaFile.displacedEntries(of: replica))
        var fields: [String: Int] = [
            "entries": entries,
            "vector": vector(replica.vector),
            "superseded": try superseded(replica.history.superseded),
        ]
        var peers: [String: Int] = [:]
        // In a fixed order, as every loop that adds objects here: a dictionary's order differs
        // between two instances of one process, and the objects' numbers are in the bytes.
        for (device, acknowledged) in replica.peerVectors.sorted(by: { $0.key < $1.key }) { peers[device] = vector(acknowledged) }
        fields["peers"] = try dictionary(peers)
        var scalars: [String: PropertyListValue] = [
            "format": .string(ReplicaFile.format),
            "version": .integer(ReplicaFile.version),
            "storeIdentifier": .string(header.storeIdentifier),
            "account": .string(header.account),
            "replica": .data(Data(replica.id.bytes)),
            "clock": .integer(Int64(bitPattern: replica.clock.last.rawValue)),
            "sequence": .integer(Int64(bitPattern: replica.sequence)),
            "synced": .bool(replica.hasSynced),
            "certificates": .dictionary(Dictionary(uniqueKeysWithValues: replica.certificates.compactMap {
                signers[$0.key] == nil ? nil : (Hex.encode($0.key), PropertyListValue.data($0.value))
            })),
            "collected": .integer(Int64(bitPattern: replica.history.collected.rawValue)),
        ]
        if replica.wantsWhole { scalars["wantsWhole"] = .bool(true) }
        if let displaced { fields["displaced"] = displaced }
        for (name, value) in scalars.sorted(by: { $0.key < $1.key }) { fields[name] = try out.flatten(value, depth: 1) }
        out.objects[root] = try dictionaryObject(fields, depth: 0)
        return out.write()
    }

    /// A dictionary of `values` (objects already added) under their names, keys in UTF-8 order.
    mutating func dictionary(_ values: [String: Int], depth: Int = 1) throws(PropertyListEncodingError) -> Int {
        out.append(try dictionaryObject(values, depth: depth))
    }

    mutating func dictionaryObject(_ values: [String: Int], depth: Int) throws(PropertyListEncodingError) -> BinaryPropertyListWriter.Object {
        let names = values.keys.sorted(by: CanonicalEncoding.utf8Less)
        var keys: [Int] = []
        keys.reserveCapacity(names.count)
        for name in names { keys.append(try out.flatten(.string(name), depth: depth + 1)) }
        return .dictionary(keys: keys, values: names.map { values[$0]! })
    }

    /// `{<origin hex>: counter}`, as ``VersionVector/propertyList``.
    mutating func vector(_ vector: VersionVector) -> Int {
        // Lowercase hex digits of 16 bytes sort as the bytes do, and the bytes as ReplicaIDs do.
        let origins = vector.counters.keys.sorted()
        var keys: [Int] = [], values: [Int] = []
        keys.reserveCapacity(origins.count)
        values.reserveCapacity(origins.count)
        for origin in origins {
            keys.append(once(origin, in: \.originDigits) { .scalar(.string(origin.hex)) })
            values.append(out.append(.scalar(.integer(Int64(bitPattern: vector[origin])))))
        }
        return out.append(.dictionary(keys: keys, values: values))
    }

    /// `[{key, timestamps: [Int]}]` by key.
    mutating func superseded(_ stamps: [StoreKey: [HLCTimestamp]]) throws(PropertyListEncodingError) -> Int {
        // Two levels below the root, as ``BinaryPropertyListWriter/flatten(_:depth:shared:)`` counts.
        let keyName = try out.flatten(.string("key"), depth: 3), timestampsName = try out.flatten(.string("timestamps"), depth: 3)
        var items: [Int] = []
        items.reserveCapacity(stamps.count)
        for (key, list) in stamps.sorted(by: { $0.key < $1.key }) {
            let keyRef = out.append(.scalar(.string(key.string)))
            var refs: [Int] = []
            refs.reserveCapacity(list.count)
            for stamp in list { refs.append(out.append(.scalar(.integer(Int64(bitPattern: stamp.rawValue))))) }
            let listRef = out.append(.array(refs))
            items.append(out.append(.dictionary(keys: [keyName, timestampsName], values: [keyRef, listRef])))
        }
        return out.append(.array(items))
    }

    /// The entries in key order, as ``Entry/propertyList``: dictionaries under
    /// ``EntryFields/file``'s names.
    mutating func entries(of replica: Replica) throws(PropertyListEncodingError) -> Int {
        try entries(replica.entries.keys.sorted().map { replica.entries[$0]! })
    }

    /// `list`'s entries in its order, as ``Entry/propertyList``.
    mutating func entries(_ list: [Entry]) throws(PropertyListEncodingError) -> Int {
        let names = EntryFields.file
        // A dictionary's keys in UTF-8 order, as ``BinaryPropertyListWriter/flatten(_:depth:shared:)`` writes them.
        let order = [names.key, names.origin, names.sequence, names.signature, names.signer, names.timestamp, names.value]
        assert(order == order.sorted(by: CanonicalEncoding.utf8Less))
        var nameRefs: [Int] = []
        for name in order { nameRefs.append(try out.flatten(.string(name), depth: 3)) }
        let (key, origin, sequence, signature, signer, timestamp, value) =
            (nameRefs[0], nameRefs[1], nameRefs[2], nameRefs[3], nameRefs[4], nameRefs[5], nameRefs[6])
        var items: [Int] = []
        items.reserveCapacity(list.count)
        for entry in list {
            let storeKey = entry.key
            var keys: [Int] = [], values: [Int] = []
            keys.reserveCapacity(order.count)
            values.reserveCapacity(order.count)
            keys.append(key)
            values.append(out.append(.scalar(.string(storeKey.string))))
            keys.append(origin)
            values.append(once(entry.origin, in: \.originBytes) { .scalar(.data(Data(entry.origin.bytes))) })
            keys.append(sequence)
            values.append(out.append(.scalar(.integer(Int64(bitPattern: entry.sequence)))))
            if let signed = entry.signature {
                keys.append(signature)
                values.append(out.append(.scalar(.data(signed.bytes))))
                keys.append(signer)
                values.append(once(signed.signer, in: \.signers) { .scalar(.data(signed.signer)) })
            }
            keys.append(timestamp)
            values.append(out.append(.scalar(.integer(Int64(bitPattern: entry.timestamp.rawValue)))))
            if let stored = entry.value {
                keys.append(value)
                values.append(try out.flatten(stored, depth: 3, shared: false))
            }
            items.append(out.append(.dictionary(keys: keys, values: values)))
        }
        return out.append(.array(items))
    }

    /// The object `table` holds for `key`, `object()` added the first time.
    mutating func once<Key: Hashable>(_ key: Key, in table: WritableKeyPath<Self, [Key: Int]>,
                                      _ object: () -> BinaryPropertyListWriter.Object) -> Int {
        if let known = self[keyPath: table][key] { return known }
        let index = out.append(object())
        self[keyPath: table][key] = index
        return index
    }
}
