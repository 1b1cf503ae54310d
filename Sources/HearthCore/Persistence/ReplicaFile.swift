import Foundation

/// The on-disk form of a ``Replica``: a binary property list that standard tools read.
///
/// ```text
/// {
///   format: "hearth-replica", version: 1,
///   storeIdentifier: String, account: String ("" when signed out),
///   replica: Data(16), clock: Int, sequence: Int,
///   vector: { <origin hex>: Int },
///   peers: { <device ID hex>: { <origin hex>: Int } },   // what each peer last acknowledged
///   synced: Bool,                                        // the initial sync has happened
///   certificates: { <device ID hex>: Data },             // DER certificates of the entries' signers
///   entries: { <key>: { value: <any>, timestamp: Int, origin: Data(16), sequence: Int,
///                       signer: Data, signature: Data } }   // no `value`: a tombstone
/// }
/// ```
///
/// `python3 -c 'import plistlib,sys; print(plistlib.load(open(sys.argv[1],"rb")))' FILE`
/// prints it.
public enum ReplicaFile {
    public static let format = "hearth-replica"
    public static let version: Int64 = 1

    /// What a file holds besides the replica.
    public struct Header: Sendable, Equatable {
        public var storeIdentifier: String
        /// The account ID, or `""` for the signed-out (local) replica.
        public var account: String

        public init(storeIdentifier: String, account: String) {
            self.storeIdentifier = storeIdentifier
            self.account = account
        }
    }

    public static func encode(_ replica: Replica, header: Header) -> Data {
        var entries: [String: PropertyListValue] = [:]
        entries.reserveCapacity(replica.entries.count)
        for (key, entry) in replica.entries { entries[key] = entry.propertyList }
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
            "entries": .dictionary(entries),
        ])
        return BinaryPropertyList.encode(document)
    }

    /// Reads a file's bytes back. Throws ``PersistenceError/Code/damaged`` with the reason
    /// for anything that is not exactly a replica file of this version.
    public static func decode(_ data: Data, path: String) throws(PersistenceError) -> (Replica, Header) {
        func damaged(_ reason: String) -> PersistenceError { PersistenceError(.damaged, path: path, reason: reason) }
        let document: PropertyListValue
        do { document = try BinaryPropertyList.decode(data) } catch { throw damaged(error.description) }
        guard let root = document.dictionaryValue else { throw damaged("the top level is not a dictionary") }
        guard root["format"]?.stringValue == format else { throw damaged("not a Hearth replica file") }
        guard root["version"]?.integerValue == version else {
            throw damaged("unsupported version \(root["version"]?.description ?? "none")")
        }
        guard let storeIdentifier = root["storeIdentifier"]?.stringValue,
              let account = root["account"]?.stringValue,
              let idData = root["replica"]?.dataValue, let id = ReplicaID(bytes: idData),
              let clock = root["clock"]?.integerValue,
              let sequence = root["sequence"]?.integerValue,
              let vectorFields = root["vector"]?.dictionaryValue,
              let entryFields = root["entries"]?.dictionaryValue else {
            throw damaged("a header field is missing or of the wrong type")
        }
        guard let vector = VersionVector(propertyList: .dictionary(vectorFields)) else {
            throw damaged("the version vector is malformed")
        }
        var peers: [String: VersionVector] = [:]
        for (device, fields) in root["peers"]?.dictionaryValue ?? [:] {
            guard let peerVector = VersionVector(propertyList: fields) else { throw damaged("peer \(device)'s vector is malformed") }
            peers[device] = peerVector
        }
        // Absent in files of earlier builds: then relays learn the certificates again from peers.
        var certificates: [Data: Data] = [:]
        for (signer, der) in root["certificates"]?.dictionaryValue ?? [:] {
            guard let signerBytes = Hex.decode(signer), let der = der.dataValue else {
                throw damaged("the certificate of \(String(reflecting: signer)) is malformed")
            }
            certificates[Data(signerBytes)] = der
        }
        var entries: [String: Entry] = [:]
        entries.reserveCapacity(entryFields.count)
        for (key, fields) in entryFields {
            guard let entry = Entry(key: key, propertyList: fields) else {
                throw damaged("entry \(String(reflecting: key)) is malformed")
            }
            entries[key] = entry
        }
        var replica = Replica(id: id, clock: HybridLogicalClock(last: HLCTimestamp(rawValue: UInt64(bitPattern: clock))),
                              sequence: UInt64(bitPattern: sequence), vector: vector, entries: entries, peerVectors: peers,
                              certificates: certificates)
        replica.hasSynced = root["synced"]?.boolValue ?? false
        return (replica, Header(storeIdentifier: storeIdentifier, account: account))
    }
}
