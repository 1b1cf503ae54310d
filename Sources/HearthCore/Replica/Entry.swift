import Foundation

/// The origin device's signature over an entry's ``Entry/signingBytes(storeIdentifier:)``.
///
/// `signer` is the device ID (SHA-256 of the device's public key) whose certificate
/// verifies `bytes`. Signatures are added off the caller's path, after a local write.
public struct EntrySignature: Hashable, Sendable {
    public var signer: Data
    public var bytes: Data

    public init(signer: Data, bytes: Data) {
        self.signer = signer
        self.bytes = bytes
    }
}

/// One key's current state in a replica: a value or a tombstone, and the metadata that
/// orders it against every other write of the same key.
public struct Entry: Hashable, Sendable {
    /// The key, compared by its exact Unicode scalars (see ``StoreKey``).
    public var key: StoreKey { didSet { quotaSize = Self.quotaSize(key, value) } }
    /// The value, or `nil` for a tombstone (a delete).
    public var value: PropertyListValue? {
        didSet {
            quotaSize = Self.quotaSize(key, value)
            isTombstone = value == nil
        }
    }
    /// When it was written, on the origin's hybrid logical clock.
    public var timestamp: HLCTimestamp
    /// The replica that wrote it.
    public var origin: ReplicaID
    /// The origin's sequence number for this write: 1, 2, 3… per origin.
    public var sequence: UInt64
    /// The origin device's signature, once signed.
    public var signature: EntrySignature?

    public init(key: StoreKey, value: PropertyListValue?, timestamp: HLCTimestamp, origin: ReplicaID,
                sequence: UInt64, signature: EntrySignature? = nil) {
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.origin = origin
        self.sequence = sequence
        self.signature = signature
        self.quotaSize = Self.quotaSize(key, value)
        self.isTombstone = value == nil
    }

    /// Whether this is a delete (no value). Stored: the replica asks at every write, and
    /// comparing the optional value with nil copies it.
    public private(set) var isTombstone: Bool

    /// Last-writer-wins: the greater (timestamp, origin) pair wins, for values and
    /// tombstones alike. Equal pairs are the same write.
    public func wins(over other: Entry) -> Bool {
        (timestamp, origin) > (other.timestamp, other.origin)
    }

    /// What this entry costs against the quotas: key bytes plus the value's canonical
    /// size; a tombstone costs nothing. Kept with the entry: the replica's tallies read it at
    /// every write of the key, and a large dictionary's size is a walk of the whole value.
    public private(set) var quotaSize: Int

    private static func quotaSize(_ key: StoreKey, _ value: PropertyListValue?) -> Int {
        guard let value else { return 0 }
        return key.utf8.count + value.canonicalSize
    }

    /// The bytes the origin signs: a domain tag, then the store identifier, key, value
    /// (or tombstone), timestamp, origin and sequence, canonically encoded.
    ///
    /// ```text
    /// "hearth-entry-v1" 00 · u32 len · store id · u32 len · key ·
    ///   (00 for a tombstone | 01 · canonical value) · u64 timestamp · 16-byte origin · u64 sequence
    /// ```
    public func signingBytes(storeIdentifier: String) -> [UInt8] {
        var w = CanonicalWriter(capacity: 64 + key.utf8.count + (value?.canonicalSize ?? 0))
        w.writeBytes(Self.signingDomain)
        w.writeString(storeIdentifier)
        w.writeString(key.string)
        if let value {
            w.writeByte(1)
            w.write(value)
        } else {
            w.writeByte(0)
        }
        w.writeUInt64(timestamp.rawValue)
        w.writeBytes(origin.bytes)
        w.writeUInt64(sequence)
        return w.bytes
    }

    /// "hearth-entry-v1" followed by a zero byte.
    public static let signingDomain: [UInt8] = Array("hearth-entry-v1".utf8) + [0]
}
