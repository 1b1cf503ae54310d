import HearthCore

/// A minimal, strict DER reader for the few fixed ASN.1 structures Hearth parses itself
/// (the encrypted PKCS#8 of a join bundle). Definite lengths only, bounded by the input:
/// a length can never point past the bytes at hand, so nothing it reads allocates more
/// than the input.
struct DERReader {
    private(set) var remaining: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { remaining = bytes }

    var isAtEnd: Bool { remaining.isEmpty }

    /// The tag of the next element, or nil at the end.
    var nextTag: UInt8? { remaining.first }

    /// Reads one element with `tag` and returns its contents.
    mutating func read(tag: UInt8, _ what: String) throws(DERError) -> ArraySlice<UInt8> {
        guard let first = remaining.first else { throw DERError("\(what) is missing") }
        guard first == tag else { throw DERError("\(what) has tag 0x\(String(first, radix: 16)), not 0x\(String(tag, radix: 16))") }
        var index = remaining.index(after: remaining.startIndex)
        guard index < remaining.endIndex else { throw DERError("\(what) has no length") }
        let lengthByte = remaining[index]
        index += 1
        var length = 0
        if lengthByte < 0x80 {
            length = Int(lengthByte)
        } else {
            // Long form with 1-3 length bytes (up to 16 MiB); 0x80 (indefinite) is not DER.
            let count = Int(lengthByte & 0x7F)
            guard (1...3).contains(count), remaining.endIndex - index >= count else { throw DERError("\(what) has a bad length") }
            for _ in 0..<count {
                length = length << 8 | Int(remaining[index])
                index += 1
            }
        }
        guard remaining.endIndex - index >= length else { throw DERError("\(what) is truncated") }
        let contents = remaining[index..<(index + length)]
        remaining = remaining[(index + length)...]
        return contents
    }

    /// Reads a SEQUENCE and returns a reader over its contents.
    mutating func sequence(_ what: String) throws(DERError) -> DERReader {
        DERReader(try read(tag: 0x30, what))
    }

    /// Reads a non-negative INTEGER that fits in 64 bits.
    mutating func unsignedInteger(_ what: String) throws(DERError) -> UInt64 {
        var bytes = try read(tag: 0x02, what)
        guard let first = bytes.first, first & 0x80 == 0 else { throw DERError("\(what) is empty or negative") }
        if first == 0, bytes.count > 1 { bytes = bytes.dropFirst() }
        guard bytes.count <= 8 else { throw DERError("\(what) is larger than 2^64") }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// Fails unless every byte was read.
    func expectEnd(_ what: String) throws(DERError) {
        guard isAtEnd else { throw DERError("\(what) has trailing bytes") }
    }
}

/// Why DER bytes did not parse.
typealias DERError = HearthError<DERErrors>

/// The domain of ``DERError``.
enum DERErrors: HearthErrorDomain {}

extension ErrorCode where Domain == DERErrors {
    /// The bytes are not the DER structure expected.
    static var malformed: Self { Self("malformed") }
}

extension HearthError where Domain == DERErrors {
    init(_ message: String, file: String = #fileID, line: UInt = #line) {
        self.init(.malformed, message, file: file, line: line)
    }

    /// What did not parse (the ``HearthError/reason``).
    var message: String { reason }
}
