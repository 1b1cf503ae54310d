import Foundation

/// The origin device's signature over an entry's ``Entry/signingBytes(storeIdentifier:)``.
///
/// `signer` is the device ID (SHA-256 of the device's public key) whose certificate
/// verifies `bytes`. Signatures are added off the caller's path, after a local write.
package struct EntrySignature: Hashable, Sendable {
    package var signer: Data
    package var bytes: Data

    package init(signer: Data, bytes: Data) {
        self.signer = signer
        self.bytes = bytes
    }
}

/// One key's current state in a replica: a value or a tombstone, and the metadata that
/// orders it against every other write of the same key.
package struct Entry: Hashable, Sendable {
    /// The key, compared by its exact Unicode scalars (see ``StoreKey``).
    package var key: StoreKey { didSet { quotaSize = Self.quotaSize(key, value) } }
    /// The value, or `nil` for a tombstone (a delete).
    package var value: PropertyListValue? {
        didSet {
            quotaSize = Self.quotaSize(key, value)
            isTombstone = value == nil
        }
    }
    /// When it was written, on the origin's hybrid logical clock.
    package var timestamp: HLCTimestamp
    /// The replica that wrote it.
    package var origin: ReplicaID
    /// The origin's sequence number for this write: 1, 2, 3… per origin.
    package var sequence: UInt64
    /// The origin device's signature, once signed.
    package var signature: EntrySignature?

    /// - Parameter quotaSize: the entry's ``quotaSize`` when the caller has it already (a local
    ///   write measured it against the limits, before the store's lock): a large value's size is
    ///   a walk of the whole value, not worth doing twice.
    package init(key: StoreKey, value: PropertyListValue?, timestamp: HLCTimestamp, origin: ReplicaID,
                sequence: UInt64, signature: EntrySignature? = nil, quotaSize: Int? = nil) {
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.origin = origin
        self.sequence = sequence
        self.signature = signature
        self.quotaSize = value == nil ? 0 : quotaSize ?? Self.quotaSize(key, value)
        self.isTombstone = value == nil
    }

    /// Whether this is a delete (no value). Stored: the replica asks at every write, and
    /// comparing the optional value with nil copies it.
    package private(set) var isTombstone: Bool

    /// Last-writer-wins: the greater (timestamp, origin) pair wins, for values and
    /// tombstones alike. Equal pairs are the same write.
    ///
    /// One exception: of two entries of one key under one origin, the later sequence wins, even
    /// if stamped earlier. Only the origin writes under it, and it writes a key after its own
    /// entry of it, so an earlier stamp there is its re-stamp of an entry its clock set in the
    /// future (``Replica/restampFutureEntries(wall:)``): a peer that took the future entry must
    /// take the re-stamp, or keep what every other device replaced (docs/simulator.md, finding 4).
    package func wins(over other: Entry) -> Bool {
        if origin == other.origin { return sequence > other.sequence }
        return (timestamp, origin) > (other.timestamp, other.origin)
    }

    /// Whether this entry replaces `other`, its own origin's entry of the key stamped later: a
    /// re-stamp (``wins(over:)``).
    package func restamps(_ other: Entry) -> Bool {
        origin == other.origin && sequence > other.sequence && timestamp < other.timestamp
    }

    /// What this entry costs against the quotas: key bytes plus the value's canonical
    /// size; a tombstone costs nothing. Kept with the entry: the replica's tallies read it at
    /// every write of the key, and a large dictionary's size is a walk of the whole value.
    package private(set) var quotaSize: Int

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
    package func signingBytes(storeIdentifier: String) -> [UInt8] {
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
    package static let signingDomain: [UInt8] = Array("hearth-entry-v1".utf8) + [0]
}
