/// Builds the DER elements of the few fixed structures Hearth writes itself.
enum DERWriter {
    /// One element: tag, definite length, contents.
    static func element(_ tag: UInt8, _ contents: [UInt8]) -> [UInt8] {
        var out = [tag]
        let count = contents.count
        if count < 0x80 {
            out.append(UInt8(count))
        } else {
            var lengthBytes: [UInt8] = []
            var rest = count
            while rest > 0 {
                lengthBytes.insert(UInt8(rest & 0xFF), at: 0)
                rest >>= 8
            }
            out.append(0x80 | UInt8(lengthBytes.count))
            out += lengthBytes
        }
        return out + contents
    }

    static func sequence(_ parts: [UInt8]...) -> [UInt8] { element(0x30, parts.flatMap { $0 }) }

    static func octetString(_ bytes: [UInt8]) -> [UInt8] { element(0x04, bytes) }

    /// A non-negative INTEGER, minimal big-endian with a leading zero when the top bit is set.
    static func integer(_ value: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        var rest = value
        repeat {
            bytes.insert(UInt8(rest & 0xFF), at: 0)
            rest >>= 8
        } while rest > 0
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return element(0x02, bytes)
    }
}
