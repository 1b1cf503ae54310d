import Foundation
import Hearth

/// JSON in and out of the command, for property-list values.
///
/// Integers stay integers and numbers with a fraction or exponent are doubles, so `2` and
/// `2.0` are different values, as in the store. Types JSON lacks use one-key objects:
/// `{"$date": "2026-01-02T03:04:05Z"}` and `{"$data": "<base64>"}`. JSON `null` is not a
/// property-list value and is refused. Our own parser (rather than JSONSerialization) keeps
/// `true` from turning into `1` and reports where the text went wrong.
package enum PropertyListJSON {
    package struct SyntaxError: Error, CustomStringConvertible {
        package let description: String
    }

    // MARK: Parsing

    package static func parse(_ text: String) throws -> PropertyListValue {
        var parser = Parser(bytes: Array(text.utf8))
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == parser.bytes.count else { throw parser.error("unexpected text after the value") }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        func error(_ what: String) -> SyntaxError {
            SyntaxError(description: "\(what) at offset \(index)")
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func expect(_ literal: String) throws {
            let utf8 = Array(literal.utf8)
            guard index + utf8.count <= bytes.count, Array(bytes[index..<index + utf8.count]) == utf8 else {
                throw error("expected \(literal)")
            }
            index += utf8.count
        }

        mutating func value(depth: Int) throws -> PropertyListValue {
            guard depth < 256 else { throw error("nested too deeply") }
            guard index < bytes.count else { throw error("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "n"): throw error("null is not a property-list value (remove the key instead)")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw error("unexpected character \(String(reflecting: String(decoding: [bytes[index]], as: UTF8.self)))")
            }
        }

        mutating func object(depth: Int) throws -> PropertyListValue {
            index += 1
            var result: [String: PropertyListValue] = [:]
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .dictionary(result) }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
                let key = try string()
                skipSpace()
                try expect(":")
                skipSpace()
                result[key] = try value(depth: depth + 1)
                skipSpace()
                guard index < bytes.count else { throw error("unterminated object") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; break }
                throw error("expected , or }")
            }
            // One-key objects name the types JSON lacks.
            if result.count == 1, let (key, inner) = result.first, case .string(let text) = inner {
                switch key {
                case "$date":
                    guard let date = parseDate(text) else { throw error("$date \(String(reflecting: text)) is not an ISO 8601 date") }
                    return .date(date)
                case "$data":
                    guard let data = Data(base64Encoded: text) else { throw error("$data is not base64") }
                    return .data(data)
                default: break
                }
            }
            return .dictionary(result)
        }

        mutating func array(depth: Int) throws -> PropertyListValue {
            index += 1
            var result: [PropertyListValue] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(result) }
            while true {
                skipSpace()
                result.append(try value(depth: depth + 1))
                skipSpace()
                guard index < bytes.count else { throw error("unterminated array") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(result) }
                throw error("expected , or ]")
            }
        }

        mutating func string() throws -> String {
            index += 1
            var scalars = String.UnicodeScalarView()
            var raw: [UInt8] = []
            func flush() { scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars); raw = [] }
            while true {
                guard index < bytes.count else { throw error("unterminated string") }
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    flush()
                    return String(scalars)
                case UInt8(ascii: "\\"):
                    flush()
                    guard index < bytes.count else { throw error("unterminated escape") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""): scalars.append("\"")
                    case UInt8(ascii: "\\"): scalars.append("\\")
                    case UInt8(ascii: "/"): scalars.append("/")
                    case UInt8(ascii: "b"): scalars.append("\u{08}")
                    case UInt8(ascii: "f"): scalars.append("\u{0C}")
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "u"):
                        var code = try hex4()
                        if (0xD800...0xDBFF).contains(code) {
                            try expect("\\u")
                            let low = try hex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(code) else { throw error("invalid \\u escape") }
                        scalars.append(scalar)
                    default: throw error("invalid escape")
                    }
                case 0..<0x20:
                    throw error("control character in string")
                default:
                    raw.append(byte)
                }
            }
        }

        mutating func hex4() throws -> UInt32 {
            guard index + 4 <= bytes.count, let code = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16) else {
                throw error("invalid \\u escape")
            }
            index += 4
            return code
        }

        mutating func number() throws -> PropertyListValue {
            let start = index
            var isInteger = true
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            func digits() -> Int {
                let from = index
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
                return index - from
            }
            guard digits() > 0 else { throw error("invalid number") }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                isInteger = false
                guard digits() > 0 else { throw error("invalid number") }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                isInteger = false
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits() > 0 else { throw error("invalid number") }
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            if isInteger {
                guard let value = Int64(text) else { throw error("integer \(text) does not fit in 64 bits") }
                return .integer(value)
            }
            guard let value = Double(text) else { throw error("invalid number") }
            return .double(value)
        }
    }

    package static func parseDate(_ text: String) -> Date? {
        (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text))
            ?? (try? Date.ISO8601FormatStyle().parse(text))
    }

    // MARK: Printing

    /// Compact JSON for `value` (keys sorted, so output is stable).
    package static func string(_ value: PropertyListValue) -> String {
        switch value {
        case .string(let text): return quote(text)
        case .integer(let number): return String(number)
        case .double(let number):
            guard number.isFinite else { return "{\"$double\":\(quote(String(number)))}" }
            return String(number)     // "2.0", "1e-05": always a double when read back
        case .bool(let flag): return flag ? "true" : "false"
        case .date(let date): return "{\"$date\":\(quote(dateString(date)))}"
        case .data(let data): return "{\"$data\":\(quote(data.base64EncodedString()))}"
        case .array(let items): return "[" + items.map(string).joined(separator: ",") + "]"
        case .dictionary(let entries):
            return "{" + entries.keys.sorted().map { quote($0) + ":" + string(entries[$0]!) }.joined(separator: ",") + "}"
        }
    }

    package static func dateString(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    package static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// A one-line form for people: strings quoted, dates ISO 8601, data by size.
    package static func human(_ value: PropertyListValue) -> String {
        switch value {
        case .data(let data): return "<\(data.count) bytes>"
        case .date(let date): return dateString(date)
        default: return string(value)
        }
    }
}
