import Foundation

/// The canonical byte encoding of values: one byte string per value, independent of
/// dictionary order, of any property-list writer, and of the platform.
///
/// It serves two purposes, so that both agree:
/// - **Sizes.** A value's size for the quotas is the length of its canonical encoding
///   (see ``PropertyListValue/canonicalSize``), so every replica counts the same bytes.
/// - **Signatures.** Entries are signed over their canonical encoding, never over a
///   property list, which could re-encode differently after a relay.
///
/// Layout (all integers big-endian; `u32` lengths and counts):
///
/// | value | bytes |
/// | --- | --- |
/// | string | `01` · u32 UTF-8 length · UTF-8 bytes |
/// | integer | `02` · 8-byte two's complement |
/// | double | `03` · 8-byte IEEE 754 bit pattern |
/// | false / true | `04` / `05` |
/// | date | `06` · 8-byte IEEE 754 bit pattern of seconds since 2001-01-01T00:00:00Z |
/// | data | `07` · u32 length · bytes |
/// | array | `08` · u32 count · each element |
/// | dictionary | `09` · u32 count · for each key in ascending UTF-8 byte order: u32 length · key · value |
///
/// docs/protocol.md documents it with test vectors.
package enum CanonicalEncoding {
    package enum Tag: UInt8, Sendable {
        case string = 0x01, integer = 0x02, double = 0x03, boolFalse = 0x04, boolTrue = 0x05
        case date = 0x06, data = 0x07, array = 0x08, dictionary = 0x09
    }

    /// The canonical bytes of `value`.
    package static func encode(_ value: PropertyListValue) -> [UInt8] {
        var writer = CanonicalWriter(capacity: value.canonicalSize)
        writer.write(value)
        return writer.bytes
    }
}

/// Appends canonical encodings to a byte buffer. Other layers (signatures) build their
/// payloads with it so that every canonical byte string is written by one piece of code.
package struct CanonicalWriter: Sendable {
    package private(set) var bytes: [UInt8]

    package init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    package mutating func write(_ value: PropertyListValue) {
        switch value {
        case .string(let s):
            writeByte(CanonicalEncoding.Tag.string.rawValue)
            writeString(s)
        case .integer(let i):
            writeByte(CanonicalEncoding.Tag.integer.rawValue)
            writeUInt64(UInt64(bitPattern: i))
        case .double(let d):
            writeByte(CanonicalEncoding.Tag.double.rawValue)
            writeUInt64(d.bitPattern)
        case .bool(let b):
            writeByte(b ? CanonicalEncoding.Tag.boolTrue.rawValue : CanonicalEncoding.Tag.boolFalse.rawValue)
        case .date(let d):
            writeByte(CanonicalEncoding.Tag.date.rawValue)
            writeUInt64(d.timeIntervalSinceReferenceDate.bitPattern)
        case .data(let d):
            writeByte(CanonicalEncoding.Tag.data.rawValue)
            writeUInt32(UInt32(d.count))
            bytes.append(contentsOf: d)
        case .array(let a):
            writeByte(CanonicalEncoding.Tag.array.rawValue)
            writeUInt32(UInt32(a.count))
            for element in a { write(element) }
        case .dictionary(let d):
            writeByte(CanonicalEncoding.Tag.dictionary.rawValue)
            writeUInt32(UInt32(d.count))
            for key in d.keys.sorted(by: CanonicalEncoding.utf8Less) {
                writeString(key)
                write(d[key]!)
            }
        }
    }

    package mutating func writeByte(_ b: UInt8) { bytes.append(b) }

    package mutating func writeUInt32(_ v: UInt32) {
        withUnsafeBytes(of: v.bigEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func writeUInt64(_ v: UInt64) {
        withUnsafeBytes(of: v.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// u32 UTF-8 length, then the UTF-8 bytes.
    package mutating func writeString(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            writeUInt32(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    package mutating func writeBytes(_ b: some Sequence<UInt8>) { bytes.append(contentsOf: b) }
}

extension CanonicalEncoding {
    /// Orders strings by their UTF-8 bytes (unsigned), the one order every platform agrees on.
    /// Swift's `<` on `String` compares by Unicode scalars after normalisation, which is not it.
    package static func utf8Less(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }
}

extension PropertyListValue {
    /// The length in bytes of this value's ``CanonicalEncoding``, computed without encoding.
    ///
    /// This is the value's size for the quotas: an entry costs the UTF-8 bytes of its key
    /// plus this. A small string costs 5 bytes plus its text, a number 9, a Boolean 1.
    package var canonicalSize: Int {
        switch self {
        case .string(let s): return 5 + s.utf8.count
        case .integer, .double, .date: return 9
        case .bool: return 1
        case .data(let d): return 5 + d.count
        case .array(let a):
            var total = 5
            for element in a { total += element.canonicalSize }
            return total
        case .dictionary(let d):
            var total = 5
            for (key, value) in d { total += 4 + key.utf8.count + value.canonicalSize }
            return total
        }
    }
}
