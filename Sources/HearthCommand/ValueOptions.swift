import ArgumentParser
import Foundation
import Hearth
import HearthDaemon

/// How `--value-file` is read.
enum ValueFileFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// JSON, as the value argument takes it (the default).
    case json
    /// UTF-8 text taken as it is, newlines included.
    case string
    /// The bytes as they are.
    case data
}

/// The value of `hearth set`: JSON, exactly one typed flag, or a file.
struct ValueOptions: ParsableArguments {
    @Argument(help: ArgumentHelp("The value as JSON: 2, 2.5, true, \"text\", [1,2], {\"a\":1}, {\"$date\":\"…\"}, {\"$data\":\"<base64>\"}.",
                                 valueName: "json"))
    var json: String?

    @Option(name: .customLong("int"), help: "An integer (64-bit).") var integer: Int64?
    @Option(name: .customLong("double"), help: "A floating-point number.") var double: Double?
    @Option(name: .customLong("bool"), help: "A Boolean: true or false.") var bool: Bool?
    @Option(name: .customLong("string"), help: "A string, taken as is (no JSON quoting needed).") var string: String?
    @Option(name: .customLong("data-base64"), help: ArgumentHelp("Bytes, base64-encoded.", valueName: "base64")) var data: String?
    @Option(name: .customLong("date"), help: ArgumentHelp("A date in ISO 8601, e.g. 2026-01-02T03:04:05Z.", valueName: "iso8601")) var date: String?

    @Option(name: .customLong("value-file"), help: ArgumentHelp(
        "Read the value from a file, or - for standard input: for values too big for the command line (up to the store's 1 MB).",
        valueName: "file"))
    var valueFile: String?
    @Option(name: .customLong("as"), help: ArgumentHelp(
        "How --value-file is read: json (default), string (UTF-8 text as is, newlines included) or data (the bytes as they are).",
        valueName: "format"))
    var fileFormat: ValueFileFormat?

    /// More than any JSON text of a 1 MB value needs (at most about 6 MB, see ControlSocket).
    static let maximumFileBytes = 16 << 20

    func validate() throws {
        let given = [json != nil, integer != nil, double != nil, bool != nil, string != nil, data != nil, date != nil, valueFile != nil]
            .filter { $0 }.count
        guard given == 1 else {
            throw ValidationError(given == 0 ? "no value: give it as JSON, with one of --int, --double, --bool, --string, --data-base64, --date, or with --value-file"
                                  : "give the value once: JSON, one typed flag, or --value-file")
        }
        if fileFormat != nil, valueFile == nil { throw ValidationError("--as applies to --value-file only") }
    }

    func resolve() throws -> PropertyListValue {
        if let valueFile { return try Self.readValue(valueFile, as: fileFormat ?? .json) }
        if let integer { return .integer(integer) }
        if let double { return .double(double) }
        if let bool { return .bool(bool) }
        if let string { return .string(string) }
        if let data {
            guard let bytes = Data(base64Encoded: data) else { throw CommandError(.invalidValue, "--data-base64 is not base64") }
            return .data(bytes)
        }
        if let date {
            guard let parsed = PropertyListJSON.parseDate(date) else { throw CommandError(.invalidValue, "--date \(date) is not an ISO 8601 date") }
            return .date(parsed)
        }
        do {
            return try PropertyListJSON.parse(json ?? "")
        } catch {
            throw CommandError(.invalidValue, "the value is not valid JSON: \(error) (for plain text use --string)")
        }
    }
}

extension ValueOptions {
    /// The value in `path` (or standard input for `-`), read as `format`.
    static func readValue(_ path: String, as format: ValueFileFormat) throws -> PropertyListValue {
        let name = path == "-" ? "standard input" : path
        let bytes = try readFile(path, name: name)
        switch format {
        case .data:
            return .data(Data(bytes))
        case .string:
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw CommandError(.invalidValue, "\(name) is not UTF-8 text (for bytes use --as data)")
            }
            return .string(text)
        case .json:
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw CommandError(.invalidValue, "\(name) is not UTF-8 JSON (for bytes use --as data)")
            }
            do {
                return try PropertyListJSON.parse(text)
            } catch {
                throw CommandError(.invalidValue, "\(name) is not valid JSON: \(error) (for plain text use --as string)")
            }
        }
    }

    private static func readFile(_ path: String, name: String) throws -> [UInt8] {
        let fd = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CommandError(.general, "cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { if fd != STDIN_FILENO { close(fd) } }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { throw CommandError(.general, "cannot read \(name): \(String(cString: strerror(errno)))") }
            if n == 0 { return bytes }
            bytes += buffer[0..<n]
            guard bytes.count <= maximumFileBytes else {
                throw CommandError(.invalidValue, "\(name) is over \(maximumFileBytes >> 20) MiB; a value is at most \(StoreLimits.maximumValueSize) bytes")
            }
        }
    }
}
