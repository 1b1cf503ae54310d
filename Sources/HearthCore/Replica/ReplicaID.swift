import Foundation

/// Names one replica: one (store, account) copy of the data on one device.
///
/// 16 random bytes, made anew each time a store opens its replica (see
/// ``Replica/reopened(as:)``): a run that crashed after sending writes it had not saved can
/// never have its sequence numbers given out again, and a replica that loses its file
/// starts with an ID nobody has recorded.
public struct ReplicaID: Hashable, Comparable, Sendable {
    /// The 16 bytes as two big-endian halves, so that comparison is the byte order.
    package let high: UInt64
    package let low: UInt64

    package init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A new random ID.
    package static func random() -> ReplicaID {
        var rng = SystemRandomNumberGenerator()
        return ReplicaID(high: rng.next(), low: rng.next())
    }

    /// A new ID from `bits` (64 random bits a call: the device's source of randomness, so that
    /// a simulation is the same for the same seed), bound to `device` when there is one
    /// (``random(boundTo:)``).
    package static func random(boundTo device: Data?, bits: () -> UInt64) -> ReplicaID {
        guard let device else { return ReplicaID(high: bits(), low: bits()) }
        return ReplicaID(high: prefix(of: device), low: bits())
    }

    /// A new ID of a replica on the device `device` (its 32-byte ID): the first 8 bytes are
    /// the device ID's, the other 8 random.
    ///
    /// Binding origins to devices is what stops one device from writing under another's origin:
    /// a receiver refuses an entry whose origin is not bound to the device that signed it
    /// (``isBound(to:)``). Otherwise a device could sign an entry under another device's origin
    /// with a huge sequence number, and every receiver's vector would then cover, and never ask
    /// for, that device's real writes. 64 random bits per run keep the runs of one device apart.
    package static func random(boundTo device: Data) -> ReplicaID {
        var rng = SystemRandomNumberGenerator()
        return ReplicaID(high: prefix(of: device), low: rng.next())
    }

    /// Whether this origin belongs to the device whose 32-byte ID is `device`.
    package func isBound(to device: Data) -> Bool {
        device.count >= 8 && high == Self.prefix(of: device)
    }

    /// The first 8 bytes of the device ID of the device this origin belongs to (if it was made
    /// by ``random(boundTo:)``): what ``devicePrefix(of:)`` gives for that device's 32-byte ID.
    package var devicePrefix: UInt64 { high }

    /// The part of a device's 32-byte ID that its origins start with.
    package static func devicePrefix(of device: Data) -> UInt64 { prefix(of: device) }

    private static func prefix(of device: Data) -> UInt64 {
        // Over the raw bytes: `Data`'s own iteration costs more than the arithmetic (checked per entry).
        device.withUnsafeBytes { $0.prefix(8).reduce(0) { $0 << 8 | UInt64($1) } }
    }

    /// Reads 16 bytes; `nil` for any other length.
    package init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var high: UInt64 = 0, low: UInt64 = 0
        for (i, b) in bytes.enumerated() {
            if i < 8 { high = high << 8 | UInt64(b) } else { low = low << 8 | UInt64(b) }
        }
        self.init(high: high, low: low)
    }

    /// Parses 32 hexadecimal digits.
    /// From 16 bytes of `Data` (a decoded entry's origin), read as two words: the generic
    /// initializer walks `Data` a byte at a time.
    package init?(bytes data: Data) {
        guard data.count == 16 else { return nil }
        let (high, low) = data.withUnsafeBytes {
            ($0.loadUnaligned(fromByteOffset: 0, as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
        self.init(high: UInt64(bigEndian: high), low: UInt64(bigEndian: low))
    }

    package init?(hex: String) {
        guard let bytes = Hex.decode(hex) else { return nil }
        self.init(bytes: bytes)
    }

    /// The 16 bytes, big-endian.
    package var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(16)
        withUnsafeBytes(of: high.bigEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: low.bigEndian) { out.append(contentsOf: $0) }
        return out
    }

    /// The 16 bytes as 32 lowercase hex digits.
    /// ``bytes`` as `Data`, with no array in between (an entry's origin, encoded with every entry).
    package var data: Data {
        withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { Data(copying: $0) }
    }

    public var hex: String { Hex.encode(bytes) }

    /// Byte order, the order that breaks timestamp ties between writers.
    public static func < (a: ReplicaID, b: ReplicaID) -> Bool {
        (a.high, a.low) < (b.high, b.low)
    }
}

extension ReplicaID: CustomStringConvertible {
    /// The first 8 hex digits.
    public var description: String { String(hex.prefix(8)) }
}
