import Foundation

/// An entry that was not taken, and why: set aside by the file loader, or refused by a sync
/// receiver (which tells the sender, in a `refused` message).
///
/// It names as much of the entry as could be read: an entry too deep to decode still has
/// its key, origin and sequence.
public struct RefusedEntry: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why an entry was refused.
    public enum Reason: String, Sendable, CaseIterable {
        /// A field is missing, of the wrong type, or does not decode.
        case malformed
        /// The key is over ``StoreLimits/maximumKeyLength`` bytes.
        case keyTooLong
        /// The value nests deeper than ``StoreLimits/maximumNestingDepth``.
        case tooDeep
        /// Key and value are over ``StoreLimits/maximumValueSize``.
        case valueTooLarge
        /// The document's shared objects expand beyond the decoder's bound.
        case tooLarge
        /// The timestamp is more than ``HybridLogicalClock/maximumDrift`` ahead of the
        /// receiver's clock: the writer's clock was probably wrong.
        case clockAhead
        /// The signature does not verify, or the entry is not signed.
        case badSignature
        /// No admitted certificate of the account names the signer.
        case unknownSigner
        /// Its signer was removed from the account before the entry's timestamp.
        case removedSigner
        /// The entry's origin is not one of its signer's (see `ReplicaID.isBound(to:)`).
        case originMismatch
        /// Its signer's entries would take more of the store than one device may
        /// (`StoreLimits.maximumSignerBytes` and friends); held back, as it may fit later.
        case signerQuota

        init(_ code: EntryRuleViolation.Code) {
            switch code {
            case .keyTooLong: self = .keyTooLong
            case .tooDeep: self = .tooDeep
            default: self = .valueTooLarge
            }
        }
    }

    /// The entry's key, if it could be read.
    public var key: StoreKey?
    /// The store run that wrote it, if it could be read.
    public var origin: ReplicaID?
    /// Its writer's sequence number, if it could be read.
    public var sequence: UInt64?
    /// Why it was refused.
    public var reason: Reason
    /// What was wrong, for people.
    public var detail: String

    package init(key: StoreKey?, origin: ReplicaID?, sequence: UInt64?, reason: Reason, detail: String) {
        self.key = key
        self.origin = origin
        self.sequence = sequence
        self.reason = reason
        self.detail = detail
    }

    /// The refused entry's metadata, when the entry itself is at hand.
    package init(_ entry: Entry, reason: Reason, detail: String) {
        self.init(key: entry.key, origin: entry.origin, sequence: entry.sequence, reason: reason, detail: detail)
    }

    /// Whether this refuses exactly `entry` (the same key, origin and sequence).
    package func refers(to entry: Entry) -> Bool {
        key == entry.key && origin == entry.origin && sequence == entry.sequence
    }

    /// The key, the reason and the detail, for a log line.
    public var description: String {
        let name = key.map { String(reflecting: $0.string) } ?? "an unreadable entry"
        let id = origin.map { " (origin \($0), sequence \(sequence.map(String.init) ?? "?"))" } ?? ""
        return "\(name)\(id): \(reason.rawValue): \(detail)"
    }
}

extension RefusedEntry {
    /// `{key?, origin?, sequence?, reason, detail}`, as a `refused` message carries it.
    package var propertyList: PropertyListValue {
        var fields: [String: PropertyListValue] = ["reason": .string(reason.rawValue), "detail": .string(detail)]
        if let key { fields["key"] = .string(key.string) }
        if let origin { fields["origin"] = .data(Data(origin.bytes)) }
        if let sequence { fields["sequence"] = .integer(Int64(bitPattern: sequence)) }
        return .dictionary(fields)
    }

    /// Reads ``propertyList`` back; `nil` if malformed. An unknown reason reads as `malformed`
    /// (a later version may know more reasons), and the detail is cut to 512 characters.
    package init?(propertyList: PropertyListValue) {
        guard let fields = propertyList.dictionaryValue, let reason = fields["reason"]?.stringValue else { return nil }
        var origin: ReplicaID?
        if let bytes = fields["origin"]?.dataValue {
            guard let id = ReplicaID(bytes: bytes) else { return nil }
            origin = id
        }
        self.init(key: fields["key"]?.stringValue.map { StoreKey($0) }, origin: origin,
                  sequence: fields["sequence"]?.integerValue.map { UInt64(bitPattern: $0) },
                  reason: Reason(rawValue: reason) ?? .malformed,
                  detail: String((fields["detail"]?.stringValue ?? "").prefix(512)))
    }
}
