import Foundation
import HearthCore
import HearthTestSupport
import Testing

@Suite("Binary property lists")
struct BinaryPropertyListTests {
    static let samples: [PropertyListValue] = [
        "", "ascii", "non-ascii: é ✓ 🏠", .string(String(repeating: "x", count: 300)),
        0, 1, 255, 256, 65535, 65536, .integer(Int64(UInt32.max)), .integer(Int64(UInt32.max) + 1), -1, .integer(.min), .integer(.max),
        0.0, -0.0, 1.5, .double(.infinity), .double(.leastNonzeroMagnitude),
        true, false,
        .date(Date(timeIntervalSinceReferenceDate: 0)), .date(Date(timeIntervalSinceReferenceDate: -1e9)),
        .data(Data()), .data(Data(0..<200)),
        [], [1, "two", 3.0, true], .array((0..<40).map { .integer($0) }),
        [:], ["a": 1, "b": [true, false], "c": ["d": .data(Data([1]))]],
        .dictionary(Dictionary(uniqueKeysWithValues: (0..<300).map { ("key\($0)", .integer(Int64($0))) })),
    ]

    @Test("Values round-trip through our codec", arguments: samples)
    func roundTrip(_ value: PropertyListValue) throws {
        let data = try BinaryPropertyList.encode(value)
        #expect(data.starts(with: Array("bplist00".utf8)))
        #expect(try BinaryPropertyList.decode(data) == value)
    }

    @Test("Equal scalars are written once, keys and values alike, and the bytes are the same every time")
    func scalarsShared() throws {
        // Two entries' worth of fields: every key repeats, and so do the equal values.
        let entry: PropertyListValue = ["key": "k", "sequence": 7, "origin": .data(Data(repeating: 1, count: 16))]
        let data = try BinaryPropertyList.encode([entry, entry, ["key": "k", "sequence": 8, "other": 7]])
        // The trailer's object count (bytes 8-15 of the last 32): the array, three dictionaries
        // and "key", "k", "sequence", 7, "origin", the data, 8, "other", each once.
        let count = data.suffix(24).prefix(8).reduce(0) { $0 << 8 | Int($1) }
        #expect(count == 12)
        #expect(try BinaryPropertyList.encode([entry, entry, ["key": "k", "sequence": 8, "other": 7]]) == data)
        #expect(try BinaryPropertyList.decode(data) == [entry, entry, ["key": "k", "sequence": 8, "other": 7]])
    }

    @Test("Foundation's PropertyListSerialization reads what we write, with the same types", arguments: samples)
    func foundationReadsOurs(_ value: PropertyListValue) throws {
        let data = try BinaryPropertyList.encode(["v": value])
        let object = try PropertyListSerialization.propertyList(from: data, format: nil)
        let back = try PropertyListValue(foundation: object)
        #expect(back == ["v": value])
    }

    @Test("We read what Foundation writes")
    func weReadFoundations() throws {
        let object: [String: Any] = ["s": "x", "i": 42, "n": -7, "d": 2.5, "b": true, "a": [1, "é"], "data": Data([1, 2])]
        let data = try PropertyListSerialization.data(fromPropertyList: object, format: .binary, options: 0)
        let value = try BinaryPropertyList.decode(data)
        #expect(value == ["s": "x", "i": 42, "n": -7, "d": 2.5, "b": true, "a": [1, "é"], "data": .data(Data([1, 2]))])
    }

    @Test("A dictionary is written keys first in UTF-8 order, then each key's value in the same order")
    func dictionaryLayout() throws {
        let data = try BinaryPropertyList.encode(["b": 2, "a": 1])
        let expected: [UInt8] = Array("bplist00".utf8)
            + [0xD2, 1, 2, 3, 4]                         // object 0: the dictionary, keys 1 2, values 3 4
            + [0x51, 0x61, 0x51, 0x62, 0x10, 1, 0x10, 2]  // objects 1-4: "a", "b", 1, 2
            + [8, 13, 15, 17, 19]                         // the offset table
            + [0, 0, 0, 0, 0, 0, 1, 1] + [0, 0, 0, 0, 0, 0, 0, 5] + [UInt8](repeating: 0, count: 8) + [0, 0, 0, 0, 0, 0, 0, 21]
        #expect(Array(data) == expected)
    }

    @Test("Encoding is deterministic: equal values give equal bytes")
    func deterministic() throws {
        var a: [String: PropertyListValue] = [:], b: [String: PropertyListValue] = [:]
        for i in 0..<100 { a["k\(i)"] = .integer(Int64(i)) }
        for i in (0..<100).reversed() { b["k\(i)"] = .integer(Int64(i)) }
        #expect(try BinaryPropertyList.encode(.dictionary(a)) == BinaryPropertyList.encode(.dictionary(b)))
    }

    @Test("Python's plistlib reads what we write")
    func pythonReadsOurs() async throws {
        let value: PropertyListValue = ["s": "é", "i": -3, "big": .integer(.max), "b": true, "d": .data(Data([255])), "f": 0.25]
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-\(UUID()).plist")
        defer { try? FileManager.default.removeItem(at: url) }
        try BinaryPropertyList.encode(value).write(to: url)
        let output = try await TestProcess.run("/usr/bin/env", ["python3", "-c",
            "import plistlib,sys,json; d=plistlib.load(open(sys.argv[1],'rb')); print(json.dumps({k:(v.hex() if isinstance(v,bytes) else v) for k,v in sorted(d.items())}))",
            url.path])
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines)
                == #"{"b": true, "big": 9223372036854775807, "d": "ff", "f": 0.25, "i": -3, "s": "\u00e9"}"#)
    }

    @Test("Truncated documents are refused, never crash")
    func truncated() throws {
        let data = try BinaryPropertyList.encode(["a": [1, 2, 3], "b": "text"])
        for length in 0..<data.count {
            #expect(throws: PropertyListDecodingError.self) { try BinaryPropertyList.decode(data.prefix(length)) }
        }
    }

    @Test("Random corruption never crashes the decoder")
    func fuzz() throws {
        var rng = SplitMix64(seed: 0xC0FFEE)
        let base = try BinaryPropertyList.encode(Self.samples.last!)
        let small = try BinaryPropertyList.encode(["a": [1, "x", ["y": .data(Data([1, 2]))]], "b": 2.5])
        for round in 0..<3000 {
            var bytes = [UInt8](round.isMultiple(of: 2) ? small : base)
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
            }
            _ = try? BinaryPropertyList.decode(Data(bytes))
        }
        for _ in 0..<500 {
            let bytes = (0..<Int(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            _ = try? BinaryPropertyList.decode(Data(Array("bplist00".utf8) + bytes))
        }
    }

    @Test("Hostile structures: cycles, deep nesting and exponential sharing are refused")
    func hostile() throws {
        // An array that contains itself: object 0 = [ref 0].
        let cycle = Self.document(objects: [[0xA1, 0x00]])
        #expect(throws: PropertyListDecodingError.self) { try BinaryPropertyList.decode(cycle) }

        // 300 nested arrays.
        var nested: [[UInt8]] = []
        for i in 0..<299 {
            let next = i + 1
            nested.append([0xA1, UInt8(next >> 8), UInt8(next & 0xFF)])
        }
        nested.append([0xA0])
        let deep = Self.document(objects: nested, refSize: 2)
        #expect(throws: PropertyListDecodingError.self) { try BinaryPropertyList.decode(deep) }

        // 40 levels of [x, x]: 2^40 elements if expanded.
        var laughs: [[UInt8]] = (0..<40).map { i in [0xA2, UInt8(i + 1), UInt8(i + 1)] }
        laughs.append([0x10, 0x01])
        #expect(throws: PropertyListDecodingError.self) { try BinaryPropertyList.decode(Self.document(objects: laughs)) }

        // A dictionary with an integer key.
        let badKey = Self.document(objects: [[0xD1, 0x01, 0x01], [0x10, 0x05]])
        #expect(throws: PropertyListDecodingError.self) { try BinaryPropertyList.decode(badKey) }

        // A data object claiming 2^62 bytes.
        let huge = Self.document(objects: [[0x4F, 0x13, 0x40, 0, 0, 0, 0, 0, 0, 0]])
        #expect(throws: PropertyListDecodingError.self) { try BinaryPropertyList.decode(huge) }
    }

    /// Builds a bplist00 document from raw object bytes, object 0 the root.
    static func document(objects: [[UInt8]], refSize: UInt8 = 1) -> Data {
        var out = Array("bplist00".utf8)
        var offsets: [Int] = []
        for object in objects {
            offsets.append(out.count)
            out += object
        }
        let table = out.count
        for offset in offsets { out += [UInt8(offset >> 8), UInt8(offset & 0xFF)] }
        out += [0, 0, 0, 0, 0, 0, 2, refSize]
        for v in [UInt64(objects.count), 0, UInt64(table)] { out += withUnsafeBytes(of: v.bigEndian, Array.init) }
        return Data(out)
    }
}

enum TestProcess {
    /// Runs a program to completion and returns its standard output; throws on failure.
    /// A `ChildProcess`: waited for without blocking a thread of the cooperative pool.
    static func run(_ path: String, _ arguments: [String]) async throws -> String {
        let result = try await ChildProcess.run(path, arguments)
        guard result.status == 0 else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(path) exited \(result.status.map(String.init) ?? "late"): \(result.error)"])
        }
        return result.output
    }
}
