import Foundation
import HearthCore
import HearthDiscovery
import HearthIdentity
@testable import HearthPairing
import Testing

@Suite("Pairing codes and messages")
struct PairingCodeTests {
    // RFC 8032's first two public keys, and nonces of ones and twos: docs/protocol.md's vector.
    static let memberKey = Hex.decode("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")!
    static let newcomerKey = Hex.decode("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c")!
    static let memberNonce = [UInt8](repeating: 1, count: 32)
    static let newcomerNonce = [UInt8](repeating: 2, count: 32)

    @Test("The code and commitment match the test vector of docs/protocol.md")
    func vector() {
        let code = PairingCode(memberKey: Self.memberKey, newcomerKey: Self.newcomerKey,
                               memberNonce: Self.memberNonce, newcomerNonce: Self.newcomerNonce)
        #expect(code.digits == "236738")
        #expect(code.description == "236 738")
        #expect(Hex.encode(PairingCode.commitment(memberKey: Self.memberKey, newcomerKey: Self.newcomerKey, memberNonce: Self.memberNonce))
                == "a746eca7ebe24d03e5336304b43cb577506c82cf19535e9b92898fc11f1e1de3")
        // Whose key is whose matters: the roles are part of the input.
        let swapped = PairingCode(memberKey: Self.newcomerKey, newcomerKey: Self.memberKey,
                                  memberNonce: Self.memberNonce, newcomerNonce: Self.newcomerNonce)
        #expect(swapped.digits == "650788")
        let key = try! Ed25519PublicKey(rawRepresentation: Self.newcomerKey)
        #expect(PairingCode.announcementHash(of: key) == "918c7a00dd89ea90")
    }

    @Test("Any change of a key or a nonce changes the code, almost always")
    func sensitivity() {
        let base = PairingCode(memberKey: Self.memberKey, newcomerKey: Self.newcomerKey,
                               memberNonce: Self.memberNonce, newcomerNonce: Self.newcomerNonce)
        var same = 0
        for i in 0..<32 {
            var key = Self.memberKey
            key[i] ^= 1
            var nonce = Self.newcomerNonce
            nonce[i] ^= 0x80
            if PairingCode(memberKey: key, newcomerKey: Self.newcomerKey, memberNonce: Self.memberNonce, newcomerNonce: Self.newcomerNonce) == base { same += 1 }
            if PairingCode(memberKey: Self.memberKey, newcomerKey: Self.newcomerKey, memberNonce: Self.memberNonce, newcomerNonce: nonce) == base { same += 1 }
        }
        #expect(same == 0)
    }

    @Test("Codes are six digits, zero-padded, spread over the whole range")
    func spread() {
        var seen = Set<String>()
        var leadingZero = false
        for _ in 0..<2000 {
            let code = PairingCode(memberKey: Self.memberKey, newcomerKey: Self.newcomerKey,
                                   memberNonce: PairingCode.nonce(), newcomerNonce: PairingCode.nonce())
            #expect(code.digits.count == 6 && code.digits.allSatisfy(\.isNumber))
            seen.insert(code.digits)
            if code.digits.hasPrefix("0") { leadingZero = true }
        }
        #expect(seen.count > 1990)   // 2000 draws from a million: a handful of repeats at most
        #expect(leadingZero)         // about 200 of 2000 start with 0
    }

    @Test("What a person types: six digits with spaces or a dash; y or yes; anything else refuses")
    func typing() {
        let code = PairingCode(typed: "236 738")!
        #expect(PairingCode(typed: "236738") == code)
        #expect(PairingCode(typed: " 236-738\n".trimmingCharacters(in: .newlines)) == code)
        #expect(PairingCode(typed: "23673") == nil)
        #expect(PairingCode(typed: "2367389") == nil)
        #expect(PairingCode(typed: "23673a") == nil)
        #expect(PairingCode(typed: "٢٣٦٧٣٨") == nil)   // other scripts' digits are not typed codes
        #expect(PairingDecision.typed("236738", for: code) == .approve)
        #expect(PairingDecision.typed("yes", for: code) == .approve)
        #expect(PairingDecision.typed("Y\n", for: code) == .approve)
        #expect(PairingDecision.typed("236 739", for: code) == .refuse("the codes differ"))
        #expect(PairingDecision.typed("", for: code) == .refuse("no confirmation was given"))
        #expect(PairingDecision.typed(nil, for: code) == .refuse("no confirmation was given"))
        #expect(PairingDecision.typed("no", for: code) == .refuse("refused by its person"))
    }

    @Test("Every message survives encoding and decoding")
    func roundTrip() throws {
        let messages: [PairingMessage] = [
            .hello(commitment: Array(repeating: 7, count: 32)),
            .nonce(Array(repeating: 8, count: 32)),
            .reveal(Array(repeating: 9, count: 32)),
            .grant(PairingGrant(caCertificate: [1, 2, 3], certificate: [4, 5], sealedCAKey: "-----BEGIN ENCRYPTED PRIVATE KEY-----")),
            .grant(PairingGrant(caCertificate: [1], certificate: [2], sealedCAKey: nil)),
            .done,
            .refused(reason: "the codes differ"),
        ]
        for message in messages {
            #expect(try PairingMessage.decode(message.encoded()) == message)
        }
        // A reason too long to send is cut, on a character boundary.
        let long = String(repeating: "é", count: 400)
        guard case .refused(let cut) = try PairingMessage.decode(PairingMessage.refused(reason: long).encoded()) else {
            Issue.record("not a refusal")
            return
        }
        #expect(cut.utf8.count == 512 && cut.allSatisfy { $0 == "é" })
    }

    @Test("Malformed frames are refused, each with its reason")
    func malformed() throws {
        func frame(_ fields: [String: PropertyListValue]) throws -> Data { try BinaryPropertyList.encode(.dictionary(fields)) }
        let cases: [(Data, String)] = [
            (Data("GET / HTTP/1.1".utf8), "not a binary property list"),
            (try BinaryPropertyList.encode(.array([.string("pair-hello")])), "not a dictionary"),
            (try frame(["nonce": .data(Data(count: 32))]), "no type"),
            (try frame(["type": .integer(1)]), "no type"),
            (try frame(["type": .string("pair-hi")]), "unknown message type"),
            (try frame(["type": .string("pair-hello")]), "commitment is missing"),
            (try frame(["type": .string("pair-hello"), "commitment": .data(Data(count: 31))]), "31 bytes, not 32"),
            (try frame(["type": .string("pair-nonce"), "nonce": .string("x")]), "nonce is missing or not data"),
            (try frame(["type": .string("pair-reveal"), "nonce": .data(Data(count: 33))]), "33 bytes, not 32"),
            (try frame(["type": .string("pair-grant"), "certificate": .data(Data([1]))]), "ca is missing"),
            (try frame(["type": .string("pair-grant"), "ca": .data(Data()), "certificate": .data(Data([1]))]), "ca is 0 bytes"),
            (try frame(["type": .string("pair-grant"), "ca": .data(Data([1])), "certificate": .data(Data(count: 4097))]), "certificate is 4097 bytes"),
            (try frame(["type": .string("pair-grant"), "ca": .data(Data([1])), "certificate": .data(Data([1])), "caKey": .data(Data([1]))]), "caKey is not a string"),
            (try frame(["type": .string("pair-grant"), "ca": .data(Data([1])), "certificate": .data(Data([1])),
                        "caKey": .string(String(repeating: "k", count: 4097))]), "caKey is 4097 bytes"),
            (try frame(["type": .string("pair-refused")]), "no reason"),
            (try frame(["type": .string("pair-refused"), "reason": .string(String(repeating: "r", count: 513))]), "513 bytes"),
            (Data(count: PairingMessage.maximumFrameLength + 1), "pairing frames are at most"),
        ]
        for (data, reason) in cases {
            #expect {
                _ = try PairingMessage.decode(data)
            } throws: { error in
                guard let error = error as? PairingError, error.code == .malformed else { return false }
                return error.message.contains(reason)
            }
        }
        // Unknown keys are ignored: a later version may add some.
        #expect(try PairingMessage.decode(frame(["type": .string("pair-done"), "later": .bool(true)])) == .done)
    }

    @Test("The mDNS announcement: v and k, parsed as untrusted input")
    func announcement() {
        let request = PairingAnnouncement(instanceName: "kitchen", port: 4242, keyHash: "918c7a00dd89ea90")
        #expect(request.txtStrings == ["v=1", "k=918c7a00dd89ea90"])
        #expect(throws: Never.self) { try request.validate() }
        let parsed = try? PairingAnnouncement.parse(txt: request.txtStrings.map { Array($0.utf8) }).get()
        #expect(parsed?.version == 1 && parsed?.keyHash == "918c7a00dd89ea90")
        for bad in [["v=1"], ["k=918c7a00dd89ea90"], ["v=1", "k=XYZ"], ["v=1", "k=918c", "k=918c7a00dd89ea90"], ["v=0", "k=918c7a00dd89ea90"]] {
            #expect((try? PairingAnnouncement.parse(txt: bad.map { Array($0.utf8) }).get()) == nil, "\(bad)")
        }
        #expect(throws: DiscoveryError.self) { try PairingAnnouncement(instanceName: "", port: 1, keyHash: "918c7a00dd89ea90").validate() }
        #expect(throws: DiscoveryError.self) { try PairingAnnouncement(instanceName: "x", port: 0, keyHash: "918c7a00dd89ea90").validate() }
        let peer = DiscoveredPeer(id: "mdns:kitchen.local", name: "kitchen", addresses: [PeerAddress(host: "10.0.0.2", family: .ipv4)],
                                  port: 4242, txt: ["v": "1", "k": "918c7a00dd89ea90"])
        let candidate = PairingCandidate(peer: peer)
        #expect(candidate?.hosts == ["10.0.0.2"] && candidate?.port == 4242 && candidate?.keyHash == "918c7a00dd89ea90")
        #expect(PairingCandidate(peer: DiscoveredPeer(id: "x", name: "x", addresses: [], port: 1, txt: ["v": "1", "k": "918c7a00dd89ea90"])) == nil)
    }
}
