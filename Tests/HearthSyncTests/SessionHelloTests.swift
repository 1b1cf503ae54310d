import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import Testing

/// The checks on a peer's first frames (`HelloCheck`), run as a value: no link, no engine, no
/// clock. The session's shell closes the connection with the error each check throws.
@Suite("Session hello checks (a value)")
struct SessionHelloTests {
    static let ours = Data(repeating: 1, count: 32)
    static let check = HelloCheck(account: ours)

    static func hello(account: Data = ours, version: Int = SyncMessage.protocolVersion) -> SyncMessage {
        .hello(SyncMessage.Hello(protocolVersion: version, account: account, stores: []))
    }

    /// The message of the error `body` throws, or nil if it throws none.
    static func refusal(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test("A hello of our protocol and account is taken, as it came")
    func helloOfOurAccount() throws {
        let message = Self.hello()
        guard case .hello(let hello) = message else { return }
        #expect(try Self.check.check(message) == .hello(hello))
    }

    @Test("A hello of another account ends the connection, naming both accounts")
    func anotherAccount() {
        let refusal = Self.refusal { _ = try Self.check.check(Self.hello(account: Data(repeating: 2, count: 32))) }
        #expect(refusal?.contains("peer is of account 02020202, we are 01010101") == true, "\(refusal ?? "no error")")
    }

    @Test("A hello of another protocol version ends the connection before any data")
    func anotherProtocol() {
        let refusal = Self.refusal { _ = try Self.check.check(Self.hello(version: SyncMessage.protocolVersion + 1)) }
        #expect(refusal?.contains("peer speaks protocol \(SyncMessage.protocolVersion + 1)") == true, "\(refusal ?? "no error")")
        #expect(Self.refusal { _ = try Self.check.check(Self.hello(version: SyncMessage.protocolVersion - 1)) } != nil)
    }

    @Test("Any other first message but removals ends the connection")
    func notAHello() {
        for message: SyncMessage in [.ping([:]), .renew, .ack(.init(store: "s", vector: VersionVector())),
                                     .store(.init(store: "s", vector: VersionVector()))] {
            let refusal = Self.refusal { _ = try Self.check.check(message) }
            #expect(refusal?.contains("the first message was not a hello") == true, "\(message.kind): \(refusal ?? "no error")")
        }
    }

    @Test("Removal records instead of a hello are handed over; they end the session as removed only if they name this device")
    func removalsInsteadOfHello() throws {
        let home = try AccountAuthority.create(displayName: "Home")
        let phone = try home.makeDevice(named: "phone")
        let record = try home.removal(of: phone.deviceID, named: "phone")
        #expect(try Self.check.check(.removals([record])) == .removals([record]))
        #expect(Self.refusal { try HelloCheck.removedByPeer(namingUs: true) } == nil)
        let refusal = Self.refusal { try HelloCheck.removedByPeer(namingUs: false) }
        #expect(refusal?.contains("not naming this device") == true, "\(refusal ?? "no error")")
    }

    @Test("Before the hello, a frame larger than a hello may take is not even decoded")
    func frameBound() {
        #expect(Self.refusal { try HelloCheck.admitFrame(of: SyncMessage.maximumHelloSize) } == nil)
        let refusal = Self.refusal { try HelloCheck.admitFrame(of: SyncMessage.maximumHelloSize + 1) }
        #expect(refusal?.contains("more than a hello may take") == true, "\(refusal ?? "no error")")
    }
}
