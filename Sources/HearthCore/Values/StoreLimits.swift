import Foundation

/// The limits of Apple's key-value store, which Hearth keeps exactly, and the one nesting
/// limit every part of Hearth shares.
///
/// Sizes count an entry as the UTF-8 bytes of its key plus the canonical size of its value
/// (``PropertyListValue/canonicalSize``: a short string costs 5 bytes plus its text, a
/// number 9, a Boolean 1). Deleted keys cost nothing.
///
/// ``check(key:value:)`` is the single rule for one entry. The setters apply it before a
/// write, the file loader to every entry it reads (a failing entry is set aside, the rest
/// loads), and the sync receiver to every entry a peer sends (a failing entry is refused and
/// the sender told; the rest of the delta applies). The binary property-list codec enforces
/// the same nesting limit, so nothing the store holds can fail to encode or to decode.
public enum StoreLimits {
    /// Keys may be at most 64 bytes of UTF-8.
    public static let maximumKeyLength = 64
    /// One entry (key + value) may be at most 1 MB (1,048,576 bytes).
    public static let maximumValueSize = 1_048_576
    /// All entries together may be at most 1 MB (1,048,576 bytes).
    public static let maximumTotalSize = 1_048_576
    /// At most 1,024 keys.
    public static let maximumKeyCount = 1024
    /// Arrays and dictionaries may nest at most 256 levels deep in a value (`[[1]]` is 2).
    ///
    /// Apple documents no limit; one is needed so that every replica can decode what another
    /// stored (recursion is bounded, and a hostile document cannot exhaust the stack). Values
    /// this deep are far beyond what preferences need.
    public static let maximumNestingDepth = 256

    /// What the current entries one device signed may take in a store it receives them into:
    /// twice the store's quotas in live bytes and keys, and 16,384 tombstones.
    ///
    /// A device's own writes respect the quotas where it makes them, so an honest device's share
    /// of any replica stays under them, but for moments (a replica may still hold an old value of
    /// it that its newer write replaced elsewhere, or a merge took a store over quota), hence the
    /// factor of two. A compromised device, which could otherwise push megabytes into every
    /// peer's store, is held to the same share. Entries past it are refused and held back (see
    /// docs/protocol.md, "Refused entries"), so a transient excess resolves once the replica
    /// catches up.
    public static let maximumSignerBytes = 2 * maximumTotalSize
    /// At most this many live keys per signing device (see ``maximumSignerBytes``).
    public static let maximumSignerKeys = 2 * maximumKeyCount
    /// At most this many deletes kept per signing device (see ``maximumSignerBytes``).
    public static let maximumSignerTombstones = 16_384

    /// Checks one entry against the per-entry rules: key length, nesting, then size. The
    /// store-wide quotas (total size, key count) depend on the rest of the store and are
    /// checked where a write is applied.
    ///
    /// Returns the entry's quota size (key bytes plus the value's canonical size; 0 for a delete).
    @discardableResult
    package static func check(key: StoreKey, value: PropertyListValue?) throws(EntryRuleViolation) -> Int {
        let keyLength = key.utf8.count
        guard keyLength <= maximumKeyLength else {
            throw EntryRuleViolation(.keyTooLong, "key is \(keyLength) bytes of UTF-8; the limit is \(maximumKeyLength)")
        }
        guard let value else { return 0 }
        let depth = value.nestingDepth(upTo: maximumNestingDepth)
        guard depth <= maximumNestingDepth else {
            throw EntryRuleViolation(.tooDeep, "the value nests arrays and dictionaries more than \(maximumNestingDepth) levels deep")
        }
        let size = keyLength + value.canonicalSize
        guard size <= maximumValueSize else {
            throw EntryRuleViolation(.valueTooLarge, "key and value take \(size) bytes; the per-value limit is \(maximumValueSize)")
        }
        return size
    }
}

/// Why one entry breaks ``StoreLimits``' per-entry rules.
package typealias EntryRuleViolation = HearthError<EntryRuleViolations>

/// The domain of ``EntryRuleViolation``.
package enum EntryRuleViolations: HearthErrorDomain {}

extension ErrorCode where Domain == EntryRuleViolations {
    /// The key is over ``StoreLimits/maximumKeyLength`` bytes of UTF-8.
    package static var keyTooLong: Self { Self("keyTooLong") }
    /// The value nests deeper than ``StoreLimits/maximumNestingDepth``.
    package static var tooDeep: Self { Self("tooDeep") }
    /// Key and value are over ``StoreLimits/maximumValueSize``.
    package static var valueTooLarge: Self { Self("valueTooLarge") }
}
