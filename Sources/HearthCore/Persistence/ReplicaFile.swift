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

    package static func encode(_ replica: Replica, header: Header) throws(PropertyListEncodingError) -> Data {
        let document: PropertyListValue = .dictionary([
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
            "entries": .array(replica.entries.keys.sorted().map { replica.entries[$0]!.propertyList }),
            "collected": .integer(Int64(bitPattern: replica.history.collected.rawValue)),
            "superseded": .array(replica.history.superseded.sorted { $0.key < $1.key }.map {
                .dictionary(["key": .string($0.key.string),
                             "timestamps": .array($0.value.map { .integer(Int64(bitPattern: $0.rawValue)) })])
            }),
        ])
        if replica.wantsWhole || !replica.displaced.isEmpty, case .dictionary(var fields) = document {
            if replica.wantsWhole { fields["wantsWhole"] = .bool(true) }
            if !replica.displaced.isEmpty {
                fields["displaced"] = .array(replica.displaced.keys.sorted().flatMap { replica.displaced[$0]!.prefix(2).map(\.propertyList) })
            }
            return try BinaryPropertyList.encode(.dictionary(fields))
        }
        return try BinaryPropertyList.encode(document)
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
