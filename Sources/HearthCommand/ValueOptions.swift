import ArgumentParser
import Foundation
import Hearth

/// The value of `hearth set`: JSON, or exactly one typed flag.
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

    func validate() throws {
        let given = [json != nil, integer != nil, double != nil, bool != nil, string != nil, data != nil, date != nil].filter { $0 }.count
        guard given == 1 else {
            throw ValidationError(given == 0 ? "no value: give it as JSON or with one of --int, --double, --bool, --string, --data-base64, --date"
                                  : "give the value once: JSON or one typed flag")
        }
    }

    func resolve() throws -> PropertyListValue {
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
