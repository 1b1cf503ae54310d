import Foundation

/// Why a byte string is not a property list Hearth accepts.
package typealias PropertyListDecodingError = HearthError<PropertyListDecodingErrors>

/// The domain of ``PropertyListDecodingError``.
package enum PropertyListDecodingErrors: HearthErrorDomain {
    package static func describe(code: ErrorCode<PropertyListDecodingErrors>, reason: String) -> String { "invalid binary property list (\(code)): \(reason)" }
}

extension ErrorCode where Domain == PropertyListDecodingErrors {
    /// No `bplist00` header, or too short to be one.
    package static var notBinaryPropertyList: Self { Self("notBinaryPropertyList") }
    /// An object, a length or a table runs past the end.
    package static var truncated: Self { Self("truncated") }
    /// The trailer's sizes or counts are impossible.
    package static var badTrailer: Self { Self("badTrailer") }
    /// A reference points outside the object table.
    package static var badReference: Self { Self("badReference") }
    /// An object's marker or size is malformed.
    package static var badObject: Self { Self("badObject") }
    /// A type Hearth does not store (sets, UIDs, …).
    package static var unsupportedType: Self { Self("unsupportedType") }
    /// Arrays and dictionaries nest deeper than the document may.
    package static var tooDeep: Self { Self("tooDeep") }
    /// Shared objects would expand beyond the decoder's budget.
    package static var tooLarge: Self { Self("tooLarge") }
    /// A container contains itself.
    package static var cycle: Self { Self("cycle") }
    /// A dictionary key is not a string.
    package static var nonStringKey: Self { Self("nonStringKey") }
    /// An integer does not fit 64 bits.
    package static var integerOutOfRange: Self { Self("integerOutOfRange") }
    /// A dictionary has the same key twice.
    package static var duplicateKey: Self { Self("duplicateKey") }
}

extension BinaryPropertyList {
    /// How deeply a whole document may nest: a value at ``StoreLimits/maximumNestingDepth``
    /// plus the few levels of the file or message around it. The encoder refuses to write
    /// deeper documents, so it never writes what this decoder refuses.
    package static let maximumDocumentDepth = StoreLimits.maximumNestingDepth + 8

    /// Decodes a whole `bplist00` document.
    ///
    /// Every offset, reference and length is checked against the input before use, so a
    /// truncated, garbage or hostile document throws rather than crashing; see ``Document``
    /// for the bounds on nesting and on what shared objects may expand to.
    package static func decode(_ data: Data) throws(PropertyListDecodingError) -> PropertyListValue {
        var document = try Document(data)
        return try document.value(document.root, maximumDepth: maximumDocumentDepth)
    }

    /// A `bplist00` document whose objects are decoded on demand.
    ///
    /// Replica files and sync messages are read through it: their envelope (the header, the
    /// list of entries, each entry's fields) is walked object by object, and each entry's value
    /// is decoded on its own, so one bad entry (too deep, malformed, over a limit) is set aside
    /// or refused by itself instead of taking the whole document with it.
    ///
    /// Bounds, shared by every decode from one document:
    /// - **Nesting**: each ``value(_:maximumDepth:)`` call takes its depth limit.
    /// - **Objects**: at most a million plus the input's size objects are decoded in all,
    ///   counting a shared object each time it is used.
    /// - **Expanded bytes**: what the decoded values would take canonically (their
    ///   ``PropertyListValue/canonicalSize``) is at most four times the input plus 8 MiB. A
    ///   document whose array references one 2 MB data object a million times (2 TB expanded)
    ///   is refused after a few MB, not decoded. Honest documents expand little: Hearth's
    ///   writer shares only equal scalars, and a store holds at most 1 MB of values.
    package struct Document: Sendable {
        /// A reference to one object of the document.
        package struct Object: Hashable, Sendable {
            let index: Int
        }

        /// What remains of the bounds above.
        struct Budget: Sendable {
            var objects: Int
            var bytes: Int
        }

        private let data: Data
        private let layout: BinaryPropertyListReader.Layout
        private var budget: Budget

        /// Reads the trailer and checks the offset table fits the document.
        package init(_ data: Data) throws(PropertyListDecodingError) {
            self.data = data
            let parsed: Result<BinaryPropertyListReader.Layout, PropertyListDecodingError> = data.withUnsafeBytes { raw in
                do throws(PropertyListDecodingError) { return .success(try BinaryPropertyListReader.Layout(bytes: raw)) } catch { return .failure(error) }
            }
            layout = try parsed.get()
            budget = Budget(objects: 1_000_000 + data.count, bytes: 8 << 20 + 4 * data.count)
        }

        /// The top-level object.
        package var root: Object { Object(index: layout.root) }

        /// The object as a whole value, nesting at most `maximumDepth` levels below it.
        package mutating func value(_ object: Object, maximumDepth: Int = StoreLimits.maximumNestingDepth) throws(PropertyListDecodingError) -> PropertyListValue {
            try withReader { (reader) throws(PropertyListDecodingError) in try reader.decodeObject(object.index, depth: 0, limit: maximumDepth) }
        }

        /// The object's keys and value references, in document order, if it is a dictionary;
        /// `nil` if it is another kind of object. Keys keep their exact spelling, and two keys
        /// that Swift's `String` would call equal are both returned.
        package mutating func dictionary(_ object: Object) throws(PropertyListDecodingError) -> [(key: String, value: Object)]? {
            try withReader { (reader) throws(PropertyListDecodingError) in
                guard let (keys, values) = try reader.dictionaryReferences(object.index) else { return nil }
                var pairs: [(key: String, value: Object)] = []
                pairs.reserveCapacity(keys.count)
                for (key, value) in zip(keys, values) {
                    pairs.append((try reader.decodeKey(key, in: object.index), Object(index: value)))
                }
                return pairs
            }
        }

        /// The object's element references, if it is an array; `nil` if it is another kind.
        package mutating func array(_ object: Object) throws(PropertyListDecodingError) -> [Object]? {
            try withReader { (reader) throws(PropertyListDecodingError) in
                try reader.arrayReferences(object.index)?.map { Object(index: $0) }
            }
        }

        private mutating func withReader<T>(_ body: (inout BinaryPropertyListReader) throws(PropertyListDecodingError) -> T) throws(PropertyListDecodingError) -> T {
            let layout = self.layout
            let start = budget
            let (result, left): (Result<T, PropertyListDecodingError>, Budget) = data.withUnsafeBytes { raw in
                var reader = BinaryPropertyListReader(bytes: raw, layout: layout, budget: start)
                do throws(PropertyListDecodingError) {
                    return (.success(try body(&reader)), reader.budget)
                } catch {
                    return (.failure(error), reader.budget)
                }
            }
            budget = left
            return try result.get()
        }
    }
}

/// Reads the objects of one `bplist00` document from its bytes, for ``BinaryPropertyList/Document``:
/// every offset, reference and length checked against the input before use, every decoded
/// object and expanded byte charged to the document's budget, and a reference back to an
/// object on the path being decoded refused as a cycle.
struct BinaryPropertyListReader {
    /// Where the parts of a document are, from its trailer.
    struct Layout: Sendable {
        let offsetSize: Int
        let refSize: Int
        let objectCount: Int
        let root: Int
        let tableOffset: Int

        init(bytes: UnsafeRawBufferPointer) throws(PropertyListDecodingError) {
            guard bytes.count >= 40, bytes.starts(with: "bplist0".utf8) else {
                throw PropertyListDecodingError(.notBinaryPropertyList, "missing the bplist00 header")
            }
            let t = bytes.count - 32
            offsetSize = Int(bytes[t + 6])
            refSize = Int(bytes[t + 7])
            let count = BinaryPropertyListReader.readUInt(bytes, at: t + 8, width: 8)
            let root = BinaryPropertyListReader.readUInt(bytes, at: t + 16, width: 8)
            let table = BinaryPropertyListReader.readUInt(bytes, at: t + 24, width: 8)
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
        }
    }

    let bytes: UnsafeRawBufferPointer
    let layout: Layout
    var budget: BinaryPropertyList.Document.Budget
    var onPath: Set<Int> = []

    init(bytes: UnsafeRawBufferPointer, layout: Layout, budget: BinaryPropertyList.Document.Budget) {
        self.bytes = bytes
        self.layout = layout
        self.budget = budget
    }

    static func readUInt(_ bytes: UnsafeRawBufferPointer, at offset: Int, width: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<width { value = value << 8 | UInt64(bytes[offset + i]) }
        return value
    }

    func offset(of object: Int) throws(PropertyListDecodingError) -> Int {
        let offset = Self.readUInt(bytes, at: layout.tableOffset + object * layout.offsetSize, width: layout.offsetSize)
        guard offset >= 8, offset < UInt64(layout.tableOffset) else {
            throw PropertyListDecodingError(.badReference, "object \(object) has offset \(offset) outside the object area")
        }
        return Int(offset)
    }

    func need(_ count: Int, at offset: Int) throws(PropertyListDecodingError) {
        guard count >= 0, offset <= layout.tableOffset, count <= layout.tableOffset - offset else {
            throw PropertyListDecodingError(.truncated, "\(count) bytes at \(offset) run past the object area")
        }
    }

    /// Charges one object and `bytes` expanded bytes to the document's budget.
    mutating func spend(bytes: Int) throws(PropertyListDecodingError) {
        budget.objects -= 1
        budget.bytes -= bytes
        guard budget.objects >= 0, budget.bytes >= 0 else {
            throw PropertyListDecodingError(.tooLarge, "shared objects expand beyond the decoding bound")
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
        guard value <= UInt64(layout.tableOffset) else {
            throw PropertyListDecodingError(.truncated, "length \(value) at \(offset) exceeds the document")
        }
        return (Int(value), offset + 2 + width)
    }

    func references(count: Int, at start: Int) throws(PropertyListDecodingError) -> [Int] {
        let (total, overflow) = count.multipliedReportingOverflow(by: layout.refSize)
        guard !overflow else { throw PropertyListDecodingError(.truncated, "\(count) references overflow") }
        try need(total, at: start)
        var refs: [Int] = []
        refs.reserveCapacity(count)
        for i in 0..<count {
            let ref = Self.readUInt(bytes, at: start + i * layout.refSize, width: layout.refSize)
            guard ref < UInt64(layout.objectCount) else {
                throw PropertyListDecodingError(.badReference, "reference \(ref) beyond \(layout.objectCount) objects")
            }
            refs.append(Int(ref))
        }
        return refs
    }

    /// The element references of array `index`, or `nil` if it is not an array.
    mutating func arrayReferences(_ index: Int) throws(PropertyListDecodingError) -> [Int]? {
        let offset = try offset(of: index)
        guard bytes[offset] >> 4 == 0xA else { return nil }
        let (count, start) = try count(marker: bytes[offset], at: offset)
        try spend(bytes: 5)
        return try references(count: count, at: start)
    }

    /// The key and value references of dictionary `index`, or `nil` if it is not one.
    mutating func dictionaryReferences(_ index: Int) throws(PropertyListDecodingError) -> (keys: [Int], values: [Int])? {
        let offset = try offset(of: index)
        guard bytes[offset] >> 4 == 0xD else { return nil }
        let (count, start) = try count(marker: bytes[offset], at: offset)
        try spend(bytes: 5)
        let keys = try references(count: count, at: start)
        return (keys, try references(count: count, at: start + count * layout.refSize))
    }

    mutating func decodeKey(_ index: Int, in dictionary: Int) throws(PropertyListDecodingError) -> String {
        guard case .string(let key) = try decodeObject(index, depth: 0, limit: 0) else {
            throw PropertyListDecodingError(.nonStringKey, "dictionary \(dictionary) has a key that is not a string")
        }
        return key
    }

    /// Decodes object `index`, found `depth` levels below where decoding started; arrays
    /// and dictionaries may nest `limit` levels in all.
    mutating func decodeObject(_ index: Int, depth: Int, limit: Int) throws(PropertyListDecodingError) -> PropertyListValue {
        let offset = try offset(of: index)
        let marker = bytes[offset]
        switch marker >> 4 {
        case 0x0:
            try spend(bytes: 1)
            switch marker {
            case 0x08: return .bool(false)
            case 0x09: return .bool(true)
            default: throw PropertyListDecodingError(.unsupportedType, "marker 0x\(String(marker, radix: 16)) (null or fill) at \(offset)")
            }
        case 0x1:
            try spend(bytes: 9)
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
            try spend(bytes: 9)
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
            try spend(bytes: 9)
            guard marker == 0x33 else { throw PropertyListDecodingError(.badObject, "date marker 0x\(String(marker, radix: 16)) at \(offset)") }
            try need(9, at: offset)
            return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: Self.readUInt(bytes, at: offset + 1, width: 8))))
        case 0x4:
            let (count, start) = try count(marker: marker, at: offset)
            try need(count, at: start)
            try spend(bytes: 5 + count)
            return .data(Data(copying: UnsafeRawBufferPointer(rebasing: bytes[start..<(start + count)])))
        case 0x5:
            let (count, start) = try count(marker: marker, at: offset)
            try need(count, at: start)
            try spend(bytes: 5 + count)
            // ASCII by the format; bytes over 0x7F are read as Latin-1 rather than refused.
            let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + count)])
            if slice.allSatisfy({ $0 < 0x80 }) { return .string(String(decoding: slice, as: UTF8.self)) }
            return .string(String(slice.map { Character(Unicode.Scalar($0)) }))
        case 0x6:
            let (count, start) = try count(marker: marker, at: offset)
            let (size, overflow) = count.multipliedReportingOverflow(by: 2)
            guard !overflow else { throw PropertyListDecodingError(.truncated, "string length overflows") }
            try need(size, at: start)
            try spend(bytes: 5 + 3 * count)
            var units: [UInt16] = []
            units.reserveCapacity(count)
            for i in 0..<count { units.append(UInt16(bytes[start + 2 * i]) << 8 | UInt16(bytes[start + 2 * i + 1])) }
            return .string(String(decoding: units, as: UTF16.self))
        case 0x7:
            // UTF-8 strings: written by some newer writers.
            let (count, start) = try count(marker: marker, at: offset)
            try need(count, at: start)
            try spend(bytes: 5 + count)
            return .string(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<(start + count)]), as: UTF8.self))
        case 0xA:
            guard depth < limit else { throw Self.tooDeep(limit) }
            guard let refs = try arrayReferences(index) else { preconditionFailure("marker 0xA is an array") }
            guard onPath.insert(index).inserted else {
                throw PropertyListDecodingError(.cycle, "array \(index) contains itself")
            }
            defer { onPath.remove(index) }
            var elements: [PropertyListValue] = []
            elements.reserveCapacity(refs.count)
            for ref in refs { elements.append(try decodeObject(ref, depth: depth + 1, limit: limit)) }
            return .array(elements)
        case 0xD:
            guard depth < limit else { throw Self.tooDeep(limit) }
            guard let (keyRefs, valueRefs) = try dictionaryReferences(index) else { preconditionFailure("marker 0xD is a dictionary") }
            guard onPath.insert(index).inserted else {
                throw PropertyListDecodingError(.cycle, "dictionary \(index) contains itself")
            }
            defer { onPath.remove(index) }
            var dictionary: [String: PropertyListValue] = [:]
            dictionary.reserveCapacity(keyRefs.count)
            for (keyRef, valueRef) in zip(keyRefs, valueRefs) {
                let key = try decodeKey(keyRef, in: index)
                try spend(bytes: 4 + key.utf8.count)
                // Two keys Swift's String calls equal (the same text in two Unicode
                // normalisations) cannot both live in a Swift dictionary; keeping either
                // would silently drop the other, so the value is refused instead.
                guard dictionary.updateValue(try decodeObject(valueRef, depth: depth + 1, limit: limit), forKey: key) == nil else {
                    throw PropertyListDecodingError(.duplicateKey, "dictionary \(index) has the key \(String(reflecting: key)) twice (or in two Unicode normalisations)")
                }
            }
            return .dictionary(dictionary)
        default:
            throw PropertyListDecodingError(.unsupportedType, "marker 0x\(String(marker, radix: 16)) (UID, set or unknown) at \(offset)")
        }
    }

    static func tooDeep(_ limit: Int) -> PropertyListDecodingError {
        PropertyListDecodingError(.tooDeep, "arrays and dictionaries nest more than \(limit) levels deep")
    }
}
