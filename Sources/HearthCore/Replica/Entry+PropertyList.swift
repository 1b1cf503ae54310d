import Foundation

// Entries and vectors as property lists: the one encoding shared by replica files and sync
// deltas, so a relayed entry is stored exactly as it travelled.

/// The field names of an entry's dictionary: long in replica files, one letter on the wire
/// (protocol 4), where every delta carries them once per entry.
package struct EntryFields: Sendable {
    package let key, value, timestamp, origin, sequence, signer, signature: String
    /// The names of the scalar fields (all but the value), made once: every entry read checks its fields against them.
    let scalars: [String]

    init(key: String, value: String, timestamp: String, origin: String, sequence: String, signer: String, signature: String) {
        (self.key, self.value, self.timestamp, self.origin, self.sequence, self.signer, self.signature) = (key, value, timestamp, origin, sequence, signer, signature)
        scalars = [key, timestamp, origin, sequence, signer, signature]
    }

    /// Replica files.
    package static let file = EntryFields(key: "key", value: "value", timestamp: "timestamp", origin: "origin",
                                          sequence: "sequence", signer: "signer", signature: "signature")
    /// Sync deltas.
    package static let wire = EntryFields(key: "k", value: "v", timestamp: "t", origin: "o",
                                          sequence: "n", signer: "s", signature: "g")
}

extension Entry {
    /// `{key, value?, timestamp, origin, sequence, signer?, signature?}`; no `value` is a tombstone.
    package var propertyList: PropertyListValue { propertyList(fields: .file) }

    /// The entry under `fields`' names; the signer is left out when it is `sender` (the device
    /// at the other end of the connection, which the receiver knows from the TLS handshake).
    package func propertyList(fields: EntryFields, sender: Data? = nil) -> PropertyListValue {
        // Room for all seven fields at once: a literal of four regrew for the signed ones.
        var dictionary = [String: PropertyListValue](minimumCapacity: 7)
        dictionary[fields.key] = .string(key.string)
        dictionary[fields.timestamp] = .integer(Int64(bitPattern: timestamp.rawValue))
        dictionary[fields.origin] = .data(origin.data)
        dictionary[fields.sequence] = .integer(Int64(bitPattern: sequence))
        if let value { dictionary[fields.value] = value }
        if let signature {
            if signature.signer != sender { dictionary[fields.signer] = .data(signature.signer) }
            dictionary[fields.signature] = .data(signature.bytes)
        }
        return .dictionary(dictionary)
    }

    /// Reads one entry of a document (a replica file or a delta): its fields one by one, then
    /// its value within ``StoreLimits/maximumNestingDepth``, then ``StoreLimits/check(key:value:)``.
    ///
    /// A problem gives a ``RefusedEntry`` naming as much of the entry as could be read (its key,
    /// origin and sequence), so the caller can set it aside or refuse it alone. `key` is for
    /// files of format version 1, which kept the key outside the entry's dictionary. `sender`
    /// is the signer of a signed entry that names none (the wire leaves out the sender's ID).
    package static func decode(_ object: BinaryPropertyList.Document.Object, in document: inout BinaryPropertyList.Document,
                              key outerKey: StoreKey? = nil, fields names: EntryFields = .file,
                              sender: Data? = nil) -> Result<Entry, RefusedEntry> {
        var refusal = RefusedEntry(key: outerKey, origin: nil, sequence: nil, reason: .malformed, detail: "")
        func refuse(_ reason: RefusedEntry.Reason, _ detail: String) -> Result<Entry, RefusedEntry> {
            refusal.reason = reason
            refusal.detail = detail
            return .failure(refusal)
        }
        let pairs: [(key: String, value: BinaryPropertyList.Document.Object)]
        do {
            guard let fields = try document.dictionary(object) else { return refuse(.malformed, "the entry is not a dictionary") }
            pairs = fields
        } catch {
            return refuse(.malformed, error.description)
        }
        // Sized once, and the names made once, not per field.
        var scalars = [String: PropertyListValue](minimumCapacity: pairs.count)
        let scalarNames = names.scalars
        var valueObject: BinaryPropertyList.Document.Object?
        for (name, field) in pairs {
            if name == names.value {
                guard valueObject == nil else { return refuse(.malformed, "the field value appears twice") }
                valueObject = field
                continue
            }
            guard scalarNames.contains(name) else { continue }
            do {
                // Depth 0: these fields are scalars, and nothing larger is decoded for them.
                guard scalars.updateValue(try document.value(field, maximumDepth: 0), forKey: name) == nil else {
                    return refuse(.malformed, "the field \(name) appears twice")
                }
            } catch {
                return refuse(.malformed, "field \(name): \(error.reason)")
            }
        }
        if let key = scalars[names.key]?.stringValue { refusal.key = StoreKey(key) }
        if let origin = scalars[names.origin]?.dataValue { refusal.origin = ReplicaID(bytes: origin) }
        if let sequence = scalars[names.sequence]?.integerValue { refusal.sequence = UInt64(bitPattern: sequence) }
        guard let key = refusal.key, let origin = refusal.origin, let sequence = refusal.sequence,
              let timestamp = scalars[names.timestamp]?.integerValue else {
            return refuse(.malformed, "a field of key, timestamp, origin or sequence is missing or of the wrong type")
        }
        var signature: EntrySignature?
        switch (scalars[names.signer], scalars[names.signature]) {
        case (nil, nil): break
        case let (named, bytes?):
            // No signer on the wire: the sender signed it.
            guard let signer = named == nil ? sender : named?.dataValue, let bytes = bytes.dataValue else {
                return refuse(.malformed, named == nil ? "a signature without a signer" : "signer or signature is not data")
            }
            signature = EntrySignature(signer: signer, bytes: bytes)
        default: return refuse(.malformed, "signer and signature must come together")
        }
        var value: PropertyListValue?
        if let valueObject {
            do {
                value = try document.value(valueObject, maximumDepth: StoreLimits.maximumNestingDepth)
            } catch where error.code == .tooDeep {
                return refuse(.tooDeep, error.reason)
            } catch where error.code == .tooLarge {
                // The whole document's expansion bound is spent: nothing after this entry can be read either.
                return refuse(.tooLarge, error.reason)
            } catch {
                return refuse(.malformed, "value: \(error.reason)")
            }
        }
        let size: Int
        do {
            size = try StoreLimits.check(key: key, value: value)
        } catch {
            return refuse(RefusedEntry.Reason(error.code), error.reason)
        }
        // The size just measured: a large value is not walked again for the entry's quota size.
        return .success(Entry(key: key, value: value, timestamp: HLCTimestamp(rawValue: UInt64(bitPattern: timestamp)),
                              origin: origin, sequence: sequence, signature: signature, quotaSize: size))
    }
}

extension VersionVector {
    /// `{<origin hex>: counter}`.
    package var propertyList: PropertyListValue {
        .dictionary(Dictionary(uniqueKeysWithValues: counters.map { ($0.key.hex, .integer(Int64(bitPattern: $0.value))) }))
    }

    /// Reads ``propertyList`` back; `nil` if malformed.
    package init?(propertyList: PropertyListValue) {
        guard let fields = propertyList.dictionaryValue else { return nil }
        var counters: [ReplicaID: UInt64] = [:]
        for (hex, value) in fields {
            guard let origin = ReplicaID(hex: hex), let counter = value.integerValue else { return nil }
            counters[origin] = UInt64(bitPattern: counter)
        }
        self.init(counters)
    }
}
