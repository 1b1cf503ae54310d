import Foundation

/// Why a byte string is not a property list Hearth accepts.
public struct PropertyListDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem, for code; ``reason`` says it for people.
    public enum Code: String, Sendable {
        case notBinaryPropertyList, truncated, badTrailer, badReference, badObject
        case unsupportedType, tooDeep, tooLarge, cycle, nonStringKey, integerOutOfRange
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "invalid binary property list (\(code.rawValue)): \(reason)" }
}

extension BinaryPropertyList {
    /// How deeply arrays and dictionaries may nest in input.
    public static let maximumDepth = 256

    /// Decodes a `bplist00` document.
    ///
    /// Every offset, reference and length is checked against the input before use, so a
    /// truncated, garbage or hostile document throws rather than crashing; a document
    /// whose shared objects would expand beyond a bound (a "billion laughs") is refused.
    public static func decode(_ data: Data) throws(PropertyListDecodingError) -> PropertyListValue {
        let result: Result<PropertyListValue, PropertyListDecodingError> = data.withUnsafeBytes { raw in
            do {
                var decoder = try Decoder(bytes: raw)
                return .success(try decoder.decodeRoot())
            } catch let error as PropertyListDecodingError {
                return .failure(error)
            } catch {
                return .failure(PropertyListDecodingError(.badObject, "\(error)"))
            }
        }
        return try result.get()
    }

    struct Decoder {
        let bytes: UnsafeRawBufferPointer
        let offsetSize: Int
        let refSize: Int
        let objectCount: Int
        let root: Int
        let tableOffset: Int
        /// Objects decoded so far, counting shared ones each time they are used.
        var budget: Int
        var onPath: Set<Int> = []

        init(bytes: UnsafeRawBufferPointer) throws(PropertyListDecodingError) {
            self.bytes = bytes
            guard bytes.count >= 40, bytes.starts(with: "bplist0".utf8) else {
                throw PropertyListDecodingError(.notBinaryPropertyList, "missing the bplist00 header")
            }
            let t = bytes.count - 32
            offsetSize = Int(bytes[t + 6])
            refSize = Int(bytes[t + 7])
            let count = Self.readUInt(bytes, at: t + 8, width: 8)
            let root = Self.readUInt(bytes, at: t + 16, width: 8)
            let table = Self.readUInt(bytes, at: t + 24, width: 8)
            guard [1, 2, 4, 8].contains(offsetSize), [1, 2, 4, 8].contains(refSize) else {
                throw PropertyListDecodingError(.badTrailer, "offset size \(offsetSize) or reference size \(refSize) is not 1, 2, 4 or 8")
            }
            guard count > 0, count < UInt64(bytes.count), root < count,
                  table >= 8, table < UInt64(t),
                  count.multipliedReportingOverflow(by: UInt64(offsetSize)).partialValue <= UInt64(t) - table else {
                throw PropertyListDecodingError(.badTrailer, "object count \(count), root \(root) or offset table at \(table) does not fit \(bytes.count) bytes")
            }
            objectCount = Int(count)
            self.root = Int(root)
            tableOffset = Int(table)
            budget = 1_000_000 + bytes.count
        }

        static func readUInt(_ bytes: UnsafeRawBufferPointer, at offset: Int, width: Int) -> UInt64 {
            var value: UInt64 = 0
            for i in 0..<width { value = value << 8 | UInt64(bytes[offset + i]) }
            return value
        }

        mutating func decodeRoot() throws(PropertyListDecodingError) -> PropertyListValue {
            try decodeObject(root, depth: 0)
        }

        func offset(of object: Int) throws(PropertyListDecodingError) -> Int {
            let offset = Self.readUInt(bytes, at: tableOffset + object * offsetSize, width: offsetSize)
            guard offset >= 8, offset < UInt64(tableOffset) else {
                throw PropertyListDecodingError(.badReference, "object \(object) has offset \(offset) outside the object area")
            }
            return Int(offset)
        }

        func need(_ count: Int, at offset: Int) throws(PropertyListDecodingError) {
            guard count >= 0, offset <= tableOffset, count <= tableOffset - offset else {
                throw PropertyListDecodingError(.truncated, "\(count) bytes at \(offset) run past the object area")
            }
        }

        /// The count in a marker's low nibble, or the integer object after it.
        func count(marker: UInt8, at offset: Int) throws(PropertyListDecodingError) -> (count: Int, start: Int) {
            let nibble = Int(marker & 0x0F)
            if nibble != 0x0F { return (nibble, offset + 1) }
            try need(2, at: offset)
            let intMarker = bytes[offset + 1]
            guard intMarker & 0xF0 == 0x10, intMarker & 0x0F <= 3 else {
                throw PropertyListDecodingError(.badObject, "a length at \(offset) is not an integer")
            }
            let width = 1 << Int(intMarker & 0x0F)
            try need(2 + width, at: offset)
            let value = Self.readUInt(bytes, at: offset + 2, width: width)
            guard value <= UInt64(tableOffset) else {
                throw PropertyListDecodingError(.truncated, "length \(value) at \(offset) exceeds the document")
            }
            return (Int(value), offset + 2 + width)
        }

        func references(count: Int, at start: Int) throws(PropertyListDecodingError) -> [Int] {
            let (total, overflow) = count.multipliedReportingOverflow(by: refSize)
            guard !overflow else { throw PropertyListDecodingError(.truncated, "\(count) references overflow") }
            try need(total, at: start)
            var refs: [Int] = []
            refs.reserveCapacity(count)
            for i in 0..<count {
                let ref = Self.readUInt(bytes, at: start + i * refSize, width: refSize)
                guard ref < UInt64(objectCount) else {
                    throw PropertyListDecodingError(.badReference, "reference \(ref) beyond \(objectCount) objects")
                }
                refs.append(Int(ref))
            }
            return refs
        }

        mutating func decodeObject(_ index: Int, depth: Int) throws(PropertyListDecodingError) -> PropertyListValue {
            guard depth <= BinaryPropertyList.maximumDepth else {
                throw PropertyListDecodingError(.tooDeep, "nesting deeper than \(BinaryPropertyList.maximumDepth)")
            }
            budget -= 1
            guard budget >= 0 else {
                throw PropertyListDecodingError(.tooLarge, "shared objects expand beyond the decoding bound")
            }
            let offset = try offset(of: index)
            let marker = bytes[offset]
            switch marker >> 4 {
            case 0x0:
                switch marker {
                case 0x08: return .bool(false)
                case 0x09: return .bool(true)
                default: throw PropertyListDecodingError(.unsupportedType, "marker 0x\(String(marker, radix: 16)) (null or fill) at \(offset)")
                }
            case 0x1:
                let width = 1 << Int(marker & 0x0F)
                try need(1 + width, at: offset)
                switch width {
                case 1, 2, 4: return .integer(Int64(Self.readUInt(bytes, at: offset + 1, width: width)))
                case 8: return .integer(Int64(bitPattern: Self.readUInt(bytes, at: offset + 1, width: 8)))
                case 16:
                    // 128-bit: only values that fit Int64 are property-list integers here.
                    let high = Self.readUInt(bytes, at: offset + 1, width: 8)
                    let low = Self.readUInt(bytes, at: offset + 9, width: 8)
                    let value = Int64(bitPattern: low)
                    guard (high == 0 && value >= 0) || (high == UInt64.max && value < 0) else {
                        throw PropertyListDecodingError(.integerOutOfRange, "128-bit integer at \(offset) does not fit 64 bits")
                    }
                    return .integer(value)
                default:
                    throw PropertyListDecodingError(.badObject, "integer of \(width) bytes at \(offset)")
                }
            case 0x2:
                switch marker & 0x0F {
                case 2:
                    try need(5, at: offset)
                    return .double(Double(Float(bitPattern: UInt32(Self.readUInt(bytes, at: offset + 1, width: 4)))))
                case 3:
                    try need(9, at: offset)
                    return .double(Double(bitPattern: Self.readUInt(bytes, at: offset + 1, width: 8)))
                default:
                    throw PropertyListDecodingError(.badObject, "real of unsupported size at \(offset)")
                }
            case 0x3:
                guard marker == 0x33 else { throw PropertyListDecodingError(.badObject, "date marker 0x\(String(marker, radix: 16)) at \(offset)") }
                try need(9, at: offset)
                return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: Self.readUInt(bytes, at: offset + 1, width: 8))))
            case 0x4:
                let (count, start) = try count(marker: marker, at: offset)
                try need(count, at: start)
                return .data(Data(bytes[start..<(start + count)]))
            case 0x5:
                let (count, start) = try count(marker: marker, at: offset)
                try need(count, at: start)
                // ASCII by the format; bytes over 0x7F are read as Latin-1 rather than refused.
                let slice = bytes[start..<(start + count)]
                if slice.allSatisfy({ $0 < 0x80 }) { return .string(String(decoding: slice, as: UTF8.self)) }
                return .string(String(slice.map { Character(Unicode.Scalar($0)) }))
            case 0x6:
                let (count, start) = try count(marker: marker, at: offset)
                let (size, overflow) = count.multipliedReportingOverflow(by: 2)
                guard !overflow else { throw PropertyListDecodingError(.truncated, "string length overflows") }
                try need(size, at: start)
                var units: [UInt16] = []
                units.reserveCapacity(count)
                for i in 0..<count { units.append(UInt16(bytes[start + 2 * i]) << 8 | UInt16(bytes[start + 2 * i + 1])) }
                return .string(String(decoding: units, as: UTF16.self))
            case 0x7:
                // UTF-8 strings: written by some newer writers.
                let (count, start) = try count(marker: marker, at: offset)
                try need(count, at: start)
                return .string(String(decoding: bytes[start..<(start + count)], as: UTF8.self))
            case 0xA:
                let (count, start) = try count(marker: marker, at: offset)
                let refs = try references(count: count, at: start)
                guard onPath.insert(index).inserted else {
                    throw PropertyListDecodingError(.cycle, "array \(index) contains itself")
                }
                defer { onPath.remove(index) }
                var elements: [PropertyListValue] = []
                elements.reserveCapacity(count)
                for ref in refs { elements.append(try decodeObject(ref, depth: depth + 1)) }
                return .array(elements)
            case 0xD:
                let (count, start) = try count(marker: marker, at: offset)
                let keyRefs = try references(count: count, at: start)
                let valueRefs = try references(count: count, at: start + count * refSize)
                guard onPath.insert(index).inserted else {
                    throw PropertyListDecodingError(.cycle, "dictionary \(index) contains itself")
                }
                defer { onPath.remove(index) }
                var dictionary: [String: PropertyListValue] = [:]
                dictionary.reserveCapacity(count)
                for i in 0..<count {
                    guard case .string(let key) = try decodeObject(keyRefs[i], depth: depth + 1) else {
                        throw PropertyListDecodingError(.nonStringKey, "dictionary \(index) has a key that is not a string")
                    }
                    dictionary[key] = try decodeObject(valueRefs[i], depth: depth + 1)
                }
                return .dictionary(dictionary)
            default:
                throw PropertyListDecodingError(.unsupportedType, "marker 0x\(String(marker, radix: 16)) (UID, set or unknown) at \(offset)")
            }
        }
    }
}
