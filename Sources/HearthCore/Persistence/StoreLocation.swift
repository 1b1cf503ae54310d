import Foundation

/// Where a replica's files live:
/// `<data directory>/<account ID or "local">/<store identifier>.plist`, with a `.lock`
/// file beside it.
///
/// The data directory is `$XDG_DATA_HOME/hearth`, or `~/.local/share/hearth` when
/// `XDG_DATA_HOME` is unset or not absolute (as the XDG Base Directory spec says).
public struct StoreLocation: Sendable, Hashable {
    /// The directory that holds every account's folder.
    package var dataDirectory: String
    package var storeIdentifier: String
    /// The account ID, or `nil` when signed out.
    package var account: String?

    package init(dataDirectory: String = StoreLocation.defaultDataDirectory(), storeIdentifier: String, account: String? = nil) {
        self.dataDirectory = dataDirectory
        self.storeIdentifier = storeIdentifier
        self.account = account
    }

    /// `$XDG_DATA_HOME/hearth`, falling back to `~/.local/share/hearth`.
    public static func defaultDataDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            return (xdg as NSString).appendingPathComponent("hearth")
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return (home as NSString).appendingPathComponent(".local/share/hearth")
    }

    /// The folder of this account (or of the signed-out replicas).
    package var directory: String {
        (dataDirectory as NSString).appendingPathComponent(account.map(Self.escape) ?? "local")
    }

    package var filePath: String {
        (directory as NSString).appendingPathComponent(Self.escape(storeIdentifier) + ".plist")
    }

    package var lockPath: String {
        (directory as NSString).appendingPathComponent(Self.escape(storeIdentifier) + ".lock")
    }

    /// Store identifiers are reverse-DNS names, but any string must map to one safe file
    /// name: bytes outside `[A-Za-z0-9._-]` become `%XX`, and a leading dot is escaped too.
    package static func escape(_ name: String) -> String {
        var out = ""
        for (i, byte) in name.utf8.enumerated() {
            let c = Character(Unicode.Scalar(byte))
            let safe = c.isASCII && (c.isLetter || c.isNumber || c == "-" || c == "_" || (c == "." && i > 0))
            out += safe ? String(c) : String(format: "%%%02X", byte)
        }
        return out.isEmpty ? "%" : out
    }

    /// The store identifier a store file is named after (`escape(identifier) + ".plist"`), or
    /// nil for any other name: how the daemon finds the stores of an account.
    package static func storeIdentifier(fromFileName name: String) -> String? {
        guard name.hasSuffix(".plist") else { return nil }
        let escaped = Array(name.utf8.dropLast(6))
        guard !escaped.isEmpty else { return nil }
        var bytes: [UInt8] = []
        var i = 0
        while i < escaped.count {
            if escaped[i] == UInt8(ascii: "%") {
                guard i + 2 < escaped.count, let byte = UInt8(String(decoding: escaped[i + 1...i + 2], as: UTF8.self), radix: 16) else {
                    // A lone "%" is the empty identifier's name; anything else is not ours.
                    return escaped.count == 1 ? "" : nil
                }
                bytes.append(byte)
                i += 3
            } else {
                bytes.append(escaped[i])
                i += 1
            }
        }
        guard let identifier = String(validating: bytes, as: UTF8.self), escape(identifier) == String(decoding: escaped, as: UTF8.self) else { return nil }
        return identifier
    }
}
