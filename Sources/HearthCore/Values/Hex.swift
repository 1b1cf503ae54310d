/// Lower-case hexadecimal, for IDs, serials and test vectors.
package enum Hex {
    package static func encode(_ bytes: some Sequence<UInt8>) -> String {
        // Straight into the string's storage: a device ID is hex-encoded at every ack a daemon
        // records (`notePeer`), and the array-then-string way allocated three times.
        if let text = bytes.withContiguousStorageIfAvailable(encode(contiguous:)) { return text }
        return Array(bytes).withUnsafeBufferPointer(encode(contiguous:))
    }

    private static func encode(contiguous bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: 2 * bytes.count) { out in
            for (i, b) in bytes.enumerated() {
                out[2 * i] = digit(b >> 4)
                out[2 * i + 1] = digit(b & 0x0f)
            }
            return 2 * bytes.count
        }
    }

    @inline(__always)
    private static func digit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble }

    /// Parses hexadecimal digits (either case, no separators); nil if malformed.
    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        var i = 0
        while i < utf8.count {
            guard let hi = nibble(utf8[i]), let lo = nibble(utf8[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}
