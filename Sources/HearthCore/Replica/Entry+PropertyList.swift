import Foundation

// Entries and vectors as property lists: the one encoding shared by replica files and sync
// deltas, so a relayed entry is stored exactly as it travelled.

extension Entry {
    /// `{value?, timestamp, origin, sequence, signer?, signature?}`; no `value` is a tombstone.
    public var propertyList: PropertyListValue {
        var fields: [String: PropertyListValue] = [
            "timestamp": .integer(Int64(bitPattern: timestamp.rawValue)),
            "origin": .data(Data(origin.bytes)),
            "sequence": .integer(Int64(bitPattern: sequence)),
        ]
        if let value { fields["value"] = value }
        if let signature {
            fields["signer"] = .data(signature.signer)
            fields["signature"] = .data(signature.bytes)
        }
        return .dictionary(fields)
    }

    /// Reads ``propertyList`` back; `nil` if a field is missing or of the wrong type.
    public init?(key: String, propertyList: PropertyListValue) {
        guard let fields = propertyList.dictionaryValue,
              let timestamp = fields["timestamp"]?.integerValue,
              let originData = fields["origin"]?.dataValue, let origin = ReplicaID(bytes: originData),
              let sequence = fields["sequence"]?.integerValue else { return nil }
        var signature: EntrySignature?
        if let signer = fields["signer"]?.dataValue, let bytes = fields["signature"]?.dataValue {
            signature = EntrySignature(signer: signer, bytes: bytes)
        }
        self.init(key: key, value: fields["value"], timestamp: HLCTimestamp(rawValue: UInt64(bitPattern: timestamp)),
                  origin: origin, sequence: UInt64(bitPattern: sequence), signature: signature)
    }
}

extension VersionVector {
    /// `{<origin hex>: counter}`.
    public var propertyList: PropertyListValue {
        .dictionary(Dictionary(uniqueKeysWithValues: counters.map { ($0.key.hex, .integer(Int64(bitPattern: $0.value))) }))
    }

    /// Reads ``propertyList`` back; `nil` if malformed.
    public init?(propertyList: PropertyListValue) {
        guard let fields = propertyList.dictionaryValue else { return nil }
        var counters: [ReplicaID: UInt64] = [:]
        for (hex, value) in fields {
            guard let origin = ReplicaID(hex: hex), let counter = value.integerValue else { return nil }
            counters[origin] = UInt64(bitPattern: counter)
        }
        self.init(counters)
    }
}
