import HearthCore

/// The Hearth fields of a peer's TXT record, validated.
///
/// A TXT record is untrusted input from anyone on the LAN: ``parse(txt:)`` accepts only
/// small, well-formed records and says why it rejected the others.
package struct ServiceRecord: Sendable, Hashable {
    /// TXT keys. Short, since every byte is multicast with each announcement.
    package enum Key {
        /// Sync protocol version, decimal.
        package static let version = "v"
        /// Account hash, lowercase hex.
        package static let account = "a"
        /// Store hash, lowercase hex: only in services of one store (protocol 2 and earlier).
        package static let store = "s"
        /// Device hash, lowercase hex.
        package static let device = "d"
    }

    /// Largest TXT record accepted, all strings with their length bytes. Ours is under 100;
    /// the cap keeps hostile records from costing memory or log space.
    package static let maximumTXTBytes = 1024
    /// Most TXT strings accepted (unknown keys are allowed for later protocol versions).
    package static let maximumTXTEntries = 32
    /// Accepted hash lengths, in hex characters.
    package static let hashLengths = 8...64
    /// Accepted protocol versions.
    package static let protocolVersions = 1...9999

    /// The peer's sync protocol version.
    package var protocolVersion: Int
    /// The peer's account hash.
    package var accountHash: String
    /// The peer's store hash, if its service is of one store (protocol 2 and earlier); `nil`
    /// for a device's service carrying every store.
    package var storeHash: String?
    /// The peer's device hash.
    package var deviceHash: String

    /// A record from its fields (not validated; see ``parse(txt:)``).
    package init(protocolVersion: Int, accountHash: String, storeHash: String? = nil, deviceHash: String) {
        self.protocolVersion = protocolVersion
        self.accountHash = accountHash
        self.storeHash = storeHash
        self.deviceHash = deviceHash
    }

    /// Why a TXT record was refused.
    package typealias Rejection = HearthError<TXTRecordRejections>

    /// Parses raw TXT strings (each one `key=value` bytes, as on the wire).
    ///
    /// Unknown keys are kept out of the record but allowed, so later versions can add fields.
    package static func parse(txt entries: [[UInt8]]) -> Result<ServiceRecord, Rejection> {
        let fields: [String: String]
        switch Self.fields(txt: entries) {
        case .failure(let rejection): return .failure(rejection)
        case .success(let parsed): fields = parsed
        }
        let version: Int
        switch Self.version(in: fields) {
        case .failure(let rejection): return .failure(rejection)
        case .success(let parsed): version = parsed
        }
        var hashes: [String] = []
        for key in [Key.account, Key.device] {
            guard let value = fields[key] else { return .failure(.missingKey(key)) }
            guard isValidHash(value) else { return .failure(.invalidValue(key: key)) }
            hashes.append(value)
        }
        // Optional: a device's service (protocol 3) names no store; one that does must be valid.
        let store = fields[Key.store]
        if let store, !isValidHash(store) { return .failure(.invalidValue(key: Key.store)) }
        return .success(ServiceRecord(protocolVersion: version, accountHash: hashes[0],
                                      storeHash: store, deviceHash: hashes[1]))
    }

    /// The TXT strings as key → value, within the size caps, printable ASCII, keys lowercased
    /// and unique: what every Hearth service type's record is read from.
    static func fields(txt entries: [[UInt8]]) -> Result<[String: String], Rejection> {
        let total = entries.reduce(0) { $0 + $1.count + 1 }
        if total > maximumTXTBytes { return .failure(.tooLarge(bytes: total)) }
        if entries.count > maximumTXTEntries { return .failure(.tooManyEntries(entries.count)) }
        var fields: [String: String] = [:]
        for entry in entries {
            // Printable ASCII only: binary or control bytes are never part of a valid record,
            // and refusing them keeps log lines and dictionaries clean.
            guard !entry.isEmpty, entry.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }),
                  let text = String(validating: entry, as: UTF8.self)
            else { return .failure(.notText) }
            let key: String, value: String
            if let equals = text.firstIndex(of: "=") {
                key = String(text[..<equals]).lowercased()
                value = String(text[text.index(after: equals)...])
            } else {
                key = text.lowercased()   // a boolean attribute (RFC 6763 §6.4)
                value = ""
            }
            if key.isEmpty { return .failure(.notText) }
            if fields[key] != nil { return .failure(.duplicateKey(key)) }
            fields[key] = value
        }
        return .success(fields)
    }

    /// The version `v` (decimal, in ``protocolVersions``) of `fields`.
    static func version(in fields: [String: String]) -> Result<Int, Rejection> {
        guard let versionText = fields[Key.version] else { return .failure(.missingKey(Key.version)) }
        guard versionText.count <= 4, versionText.allSatisfy(\.isASCIIDigit),
              let version = Int(versionText), protocolVersions.contains(version)
        else { return .failure(.invalidValue(key: Key.version)) }
        return .success(version)
    }

    /// Lowercase hex of an accepted length.
    package static func isValidHash(_ value: String) -> Bool {
        hashLengths.contains(value.utf8.count)
            && value.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

/// The domain of ``ServiceRecord/Rejection``.
package enum TXTRecordRejections: HearthErrorDomain {}

extension ErrorCode where Domain == TXTRecordRejections {
    /// The record is larger than ``ServiceRecord/maximumTXTBytes``.
    package static var tooLarge: Self { Self("tooLarge") }
    /// The record has more than ``ServiceRecord/maximumTXTEntries`` strings.
    package static var tooManyEntries: Self { Self("tooManyEntries") }
    /// A string is not UTF-8 text, or has no key.
    package static var notText: Self { Self("notText") }
    /// A required key is absent.
    package static var missingKey: Self { Self("missingKey") }
    /// A key occurs twice, so which one counts would be ambiguous.
    package static var duplicateKey: Self { Self("duplicateKey") }
    /// A required key's value is not in the expected format.
    package static var invalidValue: Self { Self("invalidValue") }
}

extension HearthError where Domain == TXTRecordRejections {
    package static func tooLarge(bytes: Int, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.tooLarge, "TXT record too large (\(bytes) bytes, limit \(ServiceRecord.maximumTXTBytes))", file: file, line: line)
    }

    package static func tooManyEntries(_ count: Int, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.tooManyEntries, "TXT record has too many strings (\(count), limit \(ServiceRecord.maximumTXTEntries))", file: file, line: line)
    }

    package static var notText: Self { Self(.notText, "TXT record holds binary data or a string without a key") }

    package static func missingKey(_ key: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.missingKey, "TXT record lacks the \"\(key)\" key", file: file, line: line)
    }

    package static func duplicateKey(_ key: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.duplicateKey, "TXT record repeats the \"\(key)\" key", file: file, line: line)
    }

    package static func invalidValue(key: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.invalidValue, "TXT record has a malformed \"\(key)\" value", file: file, line: line)
    }
}
