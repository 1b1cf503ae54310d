/// A bplist00 document written object by object, references included, so that seeds and
/// regression inputs can share one object many times (as an attacker would), which
/// `BinaryPropertyList.encode` never does. References are 2 bytes, offsets 4.
package struct RawBinaryPlist {
    package enum Object {
        case string(String)
        case integer(UInt32)
        case data(count: Int)
        case array([Int])
        case dictionary([(key: Int, value: Int)])
    }

    package var objects: [Object] = []

    package init() {}

    /// Adds an object and returns its reference.
    @discardableResult
    package mutating func add(_ object: Object) -> Int {
        objects.append(object)
        return objects.count - 1
    }

    /// The document, object 0 the root.
    package func bytes() -> [UInt8] {
        var out = Array("bplist00".utf8)
        var offsets: [Int] = []
        func count(_ marker: UInt8, _ n: Int) {
            if n < 15 {
                out.append(marker | UInt8(n))
            } else {
                out.append(marker | 0x0F)
                out.append(0x12)
                out += be32(n)
            }
        }
        for object in objects {
            offsets.append(out.count)
            switch object {
            case .string(let text):
                count(0x50, text.utf8.count)
                out += Array(text.utf8)
            case .integer(let value):
                out.append(0x12)
                out += be32(Int(value))
            case .data(let size):
                count(0x40, size)
                out += [UInt8](repeating: 0xA5, count: size)
            case .array(let refs):
                count(0xA0, refs.count)
                for ref in refs { out += be16(ref) }
            case .dictionary(let pairs):
                count(0xD0, pairs.count)
                for pair in pairs { out += be16(pair.key) }
                for pair in pairs { out += be16(pair.value) }
            }
        }
        let table = out.count
        for offset in offsets { out += be32(offset) }
        out += [0, 0, 0, 0, 0, 0, 4, 2]
        for value in [UInt64(objects.count), 0, UInt64(table)] { out += withUnsafeBytes(of: value.bigEndian, Array.init) }
        return out
    }

    private func be16(_ value: Int) -> [UInt8] {
        precondition(value < 1 << 16, "RawBinaryPlist holds at most 65,536 objects")
        return [UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    private func be32(_ value: Int) -> [UInt8] {
        [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
         UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }
}
