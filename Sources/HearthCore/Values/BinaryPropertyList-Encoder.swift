import Foundation

/// Apple's binary property-list format (`bplist00`), read and written directly from
/// ``PropertyListValue``.
///
/// Hearth writes its store files and sync deltas in this format so that standard tools
/// (`plutil`, Python's `plistlib`, Foundation's `PropertyListSerialization`) can read
/// them. It has its own codec rather than Foundation's because it must keep Booleans and
/// integers apart exactly, write the same bytes for the same value every time
/// (dictionary keys sorted, scalars shared), and refuse hostile input without crashing.
package enum BinaryPropertyList {
    /// Encodes `value` as a `bplist00` document.
    ///
    /// - Throws: ``PropertyListEncodingError`` when arrays and dictionaries nest deeper than
    ///   ``maximumDocumentDepth``: the decoder would refuse the document, so it is not written.
    package static func encode(_ value: PropertyListValue) throws(PropertyListEncodingError) -> Data {
        var encoder = BinaryPropertyListWriter()
        // A message (an entry is about 10 objects) fits without regrowing the tables.
        encoder.objects.reserveCapacity(32)
        encoder.scalarIndex.reserveCapacity(32)
        try encoder.flatten(value, depth: 0)
        return encoder.write()
    }
}

/// Why a value cannot be written as a binary property list.
package typealias PropertyListEncodingError = HearthError<PropertyListEncodingErrors>

/// The domain of ``PropertyListEncodingError``.
package enum PropertyListEncodingErrors: HearthErrorDomain {
    package static func describe(code: ErrorCode<PropertyListEncodingErrors>, reason: String) -> String { "cannot encode a binary property list: \(reason)" }
}

extension ErrorCode where Domain == PropertyListEncodingErrors {
    /// Arrays and dictionaries nest deeper than a document may.
    package static var tooDeep: Self { Self("tooDeep") }
}

/// Writes one `bplist00` document for ``BinaryPropertyList/encode(_:)``. Objects are flattened
/// into a table first (so the reference size is known before writing), with equal scalars
/// stored once, as Apple's writer does.
struct BinaryPropertyListWriter {
    enum Object {
        case scalar(PropertyListValue)
        case array([Int])
        case dictionary(keys: [Int], values: [Int])
    }

    var objects: [Object] = []
    var scalarIndex: [PropertyListValue: Int] = [:]

    /// Adds `value`, found `depth` levels below the root, to the table; returns its index.
    /// `shared`: equal scalars are stored once; otherwise each scalar is an object of its own,
    /// unhashed (for what rarely repeats: ``ReplicaFile`` shares what it knows repeats itself).
    @discardableResult
    mutating func flatten(_ value: PropertyListValue, depth: Int, shared: Bool = true) throws(PropertyListEncodingError) -> Int {
        switch value {
        case .array, .dictionary:
            guard depth < BinaryPropertyList.maximumDocumentDepth else {
                throw PropertyListEncodingError(.tooDeep, "arrays and dictionaries nest more than \(BinaryPropertyList.maximumDocumentDepth) levels deep")
            }
        default: break
        }
        switch value {
        case .array(let elements):
            let index = reserve()
            var refs: [Int] = []
            refs.reserveCapacity(elements.count)
            for element in elements { refs.append(try flatten(element, depth: depth + 1, shared: shared)) }
            objects[index] = .array(refs)
            return index
        case .dictionary(let dictionary):
            let index = reserve()
            // Sorted as pairs: each value comes with its key, not looked up again by it (a hash per field).
            let pairs = dictionary.sorted { CanonicalEncoding.utf8Less($0.key, $1.key) }
            var keyRefs: [Int] = [], valueRefs: [Int] = []
            keyRefs.reserveCapacity(pairs.count)
            valueRefs.reserveCapacity(pairs.count)
            for pair in pairs { keyRefs.append(try flatten(.string(pair.key), depth: depth + 1, shared: shared)) }
            for pair in pairs { valueRefs.append(try flatten(pair.value, depth: depth + 1, shared: shared)) }
            objects[index] = .dictionary(keys: keyRefs, values: valueRefs)
            return index
        default:
            guard shared else { return append(.scalar(value)) }
            // One hash per scalar, found or new (a lookup then an insert hashed a new one twice):
            // the slot gets `index` only if the value is new, and no earlier object has it.
            let index = objects.count
            func slot(_ value: inout Int) -> Int { value }
            let found = slot(&scalarIndex[value, default: index])
            if found == index { objects.append(.scalar(value)) }
            return found
        }
    }

    /// A slot for a container, filled once its elements are added (they follow it).
    mutating func reserve() -> Int {
        append(.array([]))
    }

    /// Adds `object` as it is; returns its index.
    mutating func append(_ object: Object) -> Int {
        objects.append(object)
        return objects.count - 1
    }

    func write() -> Data {
        let refSize = Self.byteWidth(for: UInt64(objects.count))
        var out: [UInt8] = Array("bplist00".utf8)
        out.reserveCapacity(64 + objects.count * 12)
        var offsets: [Int] = []
        offsets.reserveCapacity(objects.count)
        for object in objects {
            offsets.append(out.count)
            switch object {
            case .scalar(let value): Self.writeScalar(value, to: &out)
            case .array(let refs):
                Self.writeMarker(0xA0, count: refs.count, to: &out)
                for ref in refs { Self.writeUInt(UInt64(ref), width: refSize, to: &out) }
            case .dictionary(let keys, let values):
                Self.writeMarker(0xD0, count: keys.count, to: &out)
                for ref in keys { Self.writeUInt(UInt64(ref), width: refSize, to: &out) }
                for ref in values { Self.writeUInt(UInt64(ref), width: refSize, to: &out) }
            }
        }
        let tableOffset = out.count
        let offsetSize = Self.byteWidth(for: UInt64(tableOffset))
        for offset in offsets { Self.writeUInt(UInt64(offset), width: offsetSize, to: &out) }
        // Trailer: 5 unused bytes, sort version, offset size, ref size, counts, root, table.
        out.append(contentsOf: [0, 0, 0, 0, 0, 0, UInt8(offsetSize), UInt8(refSize)])
        Self.writeUInt(UInt64(objects.count), width: 8, to: &out)
        Self.writeUInt(0, width: 8, to: &out)
        Self.writeUInt(UInt64(tableOffset), width: 8, to: &out)
        return out.withUnsafeBytes { Data(copying: $0) }
    }

    static func byteWidth(for value: UInt64) -> Int {
        value <= 0xFF ? 1 : value <= 0xFFFF ? 2 : value <= 0xFFFF_FFFF ? 4 : 8
    }

    static func writeUInt(_ value: UInt64, width: Int, to out: inout [UInt8]) {
        var shift = (width - 1) * 8
        while shift >= 0 {
            out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
            shift -= 8
        }
    }

    /// A type nibble and a count; counts of 15 and more follow as an integer object.
    static func writeMarker(_ type: UInt8, count: Int, to out: inout [UInt8]) {
        if count < 15 {
            out.append(type | UInt8(count))
        } else {
            out.append(type | 0x0F)
            writeInteger(Int64(count), to: &out)
        }
    }

    /// Non-negative integers take the smallest of 1, 2, 4 (unsigned) or 8 bytes;
    /// negative ones always 8 (signed), as the format requires.
    static func writeInteger(_ value: Int64, to out: inout [UInt8]) {
        let width = value < 0 ? 8 : byteWidth(for: UInt64(value))
        out.append(0x10 | UInt8(width.trailingZeroBitCount))
        writeUInt(UInt64(bitPattern: value), width: width, to: &out)
    }

    static func writeScalar(_ value: PropertyListValue, to out: inout [UInt8]) {
        switch value {
        case .bool(let b): out.append(b ? 0x09 : 0x08)
        case .integer(let i): writeInteger(i, to: &out)
        case .double(let d):
            out.append(0x23)
            writeUInt(d.bitPattern, width: 8, to: &out)
        case .date(let d):
            out.append(0x33)
            writeUInt(d.timeIntervalSinceReferenceDate.bitPattern, width: 8, to: &out)
        case .data(let d):
            writeMarker(0x40, count: d.count, to: &out)
            out.append(contentsOf: d)
        case .string(let s):
            if s.utf8.allSatisfy({ $0 < 0x80 }) {
                writeMarker(0x50, count: s.utf8.count, to: &out)
                out.append(contentsOf: s.utf8)
            } else {
                let units = Array(s.utf16)
                writeMarker(0x60, count: units.count, to: &out)
                for unit in units { out.append(UInt8(unit >> 8)); out.append(UInt8(unit & 0xFF)) }
            }
        case .array, .dictionary:
            preconditionFailure("containers are flattened, never written as scalars")
        }
    }
}
