import Foundation
import HearthCore

/// The messages of the pairing protocol, each one frame: a binary property list dictionary with
/// a `type` field (docs/protocol.md, "Pairing", lists the fields and the order).
///
/// ```text
/// member → newcomer   pair-hello   {commitment}
/// newcomer → member   pair-nonce   {nonce}
/// member → newcomer   pair-reveal  {nonce}            both now show the code
/// member → newcomer   pair-grant   {ca, certificate, caKey?}   or pair-refused {reason}
/// newcomer → member   pair-done    {}                           or pair-refused {reason}
/// ```
///
/// Decoding is strict: every field is checked for type and size, and anything else is a
/// ``PairingError/Code/malformed`` error naming what is wrong. Unknown keys are ignored (a
/// later version may add some).
package enum PairingMessage: Sendable, Equatable {
    /// The member's commitment to its nonce (``PairingCode/commitment(memberKey:newcomerKey:memberNonce:)``).
    case hello(commitment: [UInt8])
    /// The newcomer's nonce.
    case nonce([UInt8])
    /// The member's nonce, opening its commitment.
    case reveal([UInt8])
    /// The member admits the newcomer.
    case grant(PairingGrant)
    /// The newcomer stored the grant.
    case done
    /// Either side ends the pairing, saying why.
    case refused(reason: String)

    /// The largest frame either side sends or reads: a grant is about 1.5 KB.
    package static let maximumFrameLength = 16 * 1024
    /// A certificate in a grant is at most this many bytes of DER.
    package static let maximumCertificateSize = 4096
    /// The sealed account key in a grant is at most this many bytes of PEM.
    package static let maximumSealedKeySize = 4096
    /// A reason is at most this many bytes of UTF-8 (longer ones are cut when sent).
    package static let maximumReasonBytes = 512

    /// The `type` field of each message.
    package var type: String {
        switch self {
        case .hello: "pair-hello"
        case .nonce: "pair-nonce"
        case .reveal: "pair-reveal"
        case .grant: "pair-grant"
        case .done: "pair-done"
        case .refused: "pair-refused"
        }
    }

    /// The frame payload.
    package func encoded() throws -> Data {
        var fields: [String: PropertyListValue] = ["type": .string(type)]
        switch self {
        case .hello(let commitment): fields["commitment"] = .data(Data(commitment))
        case .nonce(let nonce), .reveal(let nonce): fields["nonce"] = .data(Data(nonce))
        case .grant(let grant):
            fields["ca"] = .data(Data(grant.caCertificate))
            fields["certificate"] = .data(Data(grant.certificate))
            if let key = grant.sealedCAKey { fields["caKey"] = .string(key) }
        case .done: break
        case .refused(let reason): fields["reason"] = .string(Self.cut(reason))
        }
        return try BinaryPropertyList.encode(.dictionary(fields))
    }

    /// Parses a frame payload.
    ///
    /// - Throws: ``PairingError/Code/malformed`` with what is wrong.
    package static func decode(_ data: Data) throws(PairingError) -> PairingMessage {
        guard data.count <= maximumFrameLength else {
            throw .malformed("a frame of \(data.count) bytes; pairing frames are at most \(maximumFrameLength)")
        }
        let value: PropertyListValue
        do {
            value = try BinaryPropertyList.decode(data)
        } catch {
            throw .malformed("the frame is not a binary property list: \(error)")
        }
        guard let fields = value.dictionaryValue else { throw .malformed("the frame is not a dictionary") }
        guard let type = fields["type"]?.stringValue else { throw .malformed("the message has no type") }
        switch type {
        case "pair-hello":
            return .hello(commitment: try bytes(fields, "commitment", type: type, exactly: 32))
        case "pair-nonce":
            return .nonce(try bytes(fields, "nonce", type: type, exactly: PairingCode.nonceLength))
        case "pair-reveal":
            return .reveal(try bytes(fields, "nonce", type: type, exactly: PairingCode.nonceLength))
        case "pair-grant":
            let ca = try bytes(fields, "ca", type: type, atMost: maximumCertificateSize)
            let certificate = try bytes(fields, "certificate", type: type, atMost: maximumCertificateSize)
            var key: String?
            if let value = fields["caKey"] {
                guard let text = value.stringValue else { throw .malformed("\(type): caKey is not a string") }
                guard !text.isEmpty, text.utf8.count <= maximumSealedKeySize else {
                    throw .malformed("\(type): caKey is \(text.utf8.count) bytes (1 to \(maximumSealedKeySize))")
                }
                key = text
            }
            return .grant(PairingGrant(caCertificate: ca, certificate: certificate, sealedCAKey: key))
        case "pair-done":
            return .done
        case "pair-refused":
            guard let reason = fields["reason"]?.stringValue else { throw .malformed("\(type): no reason") }
            guard reason.utf8.count <= maximumReasonBytes else {
                throw .malformed("\(type): the reason is \(reason.utf8.count) bytes (at most \(maximumReasonBytes))")
            }
            return .refused(reason: reason)
        default:
            throw .malformed("unknown message type \"\(String(type.prefix(40)))\"")
        }
    }

    private static func bytes(_ fields: [String: PropertyListValue], _ key: String, type: String, exactly length: Int) throws(PairingError) -> [UInt8] {
        guard let data = fields[key]?.dataValue else { throw .malformed("\(type): \(key) is missing or not data") }
        guard data.count == length else { throw .malformed("\(type): \(key) is \(data.count) bytes, not \(length)") }
        return Array(data)
    }

    private static func bytes(_ fields: [String: PropertyListValue], _ key: String, type: String, atMost limit: Int) throws(PairingError) -> [UInt8] {
        guard let data = fields[key]?.dataValue else { throw .malformed("\(type): \(key) is missing or not data") }
        guard !data.isEmpty, data.count <= limit else { throw .malformed("\(type): \(key) is \(data.count) bytes (1 to \(limit))") }
        return Array(data)
    }

    /// `reason` cut to ``maximumReasonBytes`` on a character boundary.
    static func cut(_ reason: String) -> String {
        if reason.utf8.count <= maximumReasonBytes { return reason }
        var kept = ""
        for character in reason {
            if kept.utf8.count + String(character).utf8.count > maximumReasonBytes { break }
            kept.append(character)
        }
        return kept
    }
}

/// What a member sends to admit a newcomer: the account CA certificate, the device certificate
/// it issued for the newcomer's key, and (unless it keeps it) the account's CA key as it stores
/// it, sealed under the account passphrase.
package struct PairingGrant: Sendable, Equatable {
    /// DER.
    package var caCertificate: [UInt8]
    /// DER.
    package var certificate: [UInt8]
    /// PEM ("ENCRYPTED PRIVATE KEY"), or nil when the member admits a device that cannot admit others.
    package var sealedCAKey: String?

    package init(caCertificate: [UInt8], certificate: [UInt8], sealedCAKey: String?) {
        self.caCertificate = caCertificate
        self.certificate = certificate
        self.sealedCAKey = sealedCAKey
    }
}
