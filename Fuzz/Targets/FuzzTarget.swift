import Foundation
import HearthCore
import HearthDiscovery
import HearthIdentity
import HearthSync
import HearthTransport
import NIOCore
import NIOEmbedded

/// The decoders that take input from outside (a peer, the LAN, a file, a join bundle), each
/// as one fuzz target: `run` feeds one input through the real decoder.
///
/// Shared by the libFuzzer entry point (`Fuzz/Entry`, built by scripts/fuzz.sh) and the
/// unit test that replays `Fuzz/regressions/<target>/`: a refusal or a success is fine,
/// a trap, a hang or unbounded memory is the bug.
package enum FuzzTarget: String, CaseIterable, Sendable {
    /// A sync frame payload: `SyncMessage(decoding:)`.
    case syncMessage = "sync-message"
    /// A binary property list: `BinaryPropertyList.decode`.
    case binaryPlist = "binary-plist"
    /// A byte stream split into frames by `FrameDecoder` (in chunks), each frame then
    /// decoded as a sync message.
    case frames
    /// A DNS TXT record's RDATA (length-prefixed strings): `ServiceRecord.parse(txt:)`.
    case txtRecord = "txt-record"
    /// A join bundle opened with the passphrase "fuzz".
    case joinBundle = "join-bundle"
    /// A replica file: `ReplicaFile.decode`.
    case storeFile = "store-file"

    /// The passphrase of generated join bundle seeds, so that mutations also reach the
    /// decrypted key's parsing.
    package static let bundlePassphrase = "fuzz"

    /// Feeds `data` to the target's decoder. Returns whether it was accepted; bad input is
    /// refused with an error, never a trap.
    @discardableResult
    package func run(_ data: Data) -> Bool {
        switch self {
        case .syncMessage:
            return (try? SyncMessage(decoding: data)) != nil
        case .binaryPlist:
            return (try? BinaryPropertyList.decode(data)) != nil
        case .frames:
            return Self.frames(data)
        case .txtRecord:
            guard let strings = Self.txtStrings(data) else { return false }
            if case .success = ServiceRecord.parse(txt: strings) { return true }
            return false
        case .joinBundle:
            // The KDF is the expensive part by design (about 1 s at Hearth's standard N):
            // inputs whose bounded parameters are still costly are parsed but not opened,
            // so the fuzzer spends its time on parsing, not on scrypt.
            let text = String(decoding: data, as: UTF8.self)
            if let info = try? EncryptedPrivateKeyInfo(pem: text), info.parameters.n * info.parameters.r * info.parameters.p > 8 << 10 {
                return false
            }
            return (try? JoinBundle.open(data, passphrase: Self.bundlePassphrase)) != nil
        case .storeFile:
            return (try? ReplicaFile.decode(data, path: "fuzz-input")) != nil
        }
    }

    /// RDATA of a TXT record: each string a length byte and that many bytes. nil when a
    /// length runs past the end (as the DNS layer would drop it).
    static func txtStrings(_ data: Data) -> [[UInt8]]? {
        var strings: [[UInt8]] = []
        var index = data.startIndex
        while index < data.endIndex {
            let length = Int(data[index])
            index += 1
            guard data.endIndex - index >= length else { return nil }
            strings.append(Array(data[index..<(index + length)]))
            index += length
        }
        return strings
    }

    /// The first byte says how the rest is cut into reads (1 to 256 bytes each), so that
    /// the fuzzer explores frames split anywhere across reads.
    static func frames(_ data: Data) -> Bool {
        guard let first = data.first else { return false }
        let chunk = Int(first) + 1
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder()))
        var accepted = true
        var rest = data.dropFirst()
        while !rest.isEmpty, accepted {
            let piece = rest.prefix(chunk)
            rest = rest.dropFirst(piece.count)
            do { try channel.writeInbound(ByteBuffer(bytes: piece)) } catch { accepted = false }
            while let frame = try? channel.readInbound(as: ByteBuffer.self) {
                _ = try? SyncMessage(decoding: Data(frame.readableBytesView))
            }
        }
        do { _ = try channel.finish() } catch { accepted = false }
        return accepted
    }
}
