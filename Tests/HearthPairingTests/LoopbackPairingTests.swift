import Foundation
import Logging
import HearthCore
import HearthIdentity
import HearthPairing
import HearthTransport
import NIOCore
import Testing

/// Two (or three) devices on 127.0.0.1, each with its own account directory: a member that
/// created the account, a newcomer with none. No mDNS: the member is given the address.
struct Household {
    let root: URL
    let member: AccountStore
    let newcomer: AccountStore
    let memberIdentity: DeviceIdentity
    static let passphrase = "pairing test passphrase, not a real one"

    init() throws {
        root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("hearth-pairing-\(UUID().uuidString)")
        member = AccountStore(directory: root.appendingPathComponent("member"), logger: Logger(label: "test"), scrypt: .testing)
        newcomer = AccountStore(directory: root.appendingPathComponent("newcomer"), logger: Logger(label: "test"), scrypt: .testing)
        memberIdentity = try member.createAccount(displayName: "Pairing home", passphrase: Self.passphrase, deviceName: "laptop")
    }

    func store(_ name: String) -> AccountStore { AccountStore(directory: root.appendingPathComponent(name), logger: Logger(label: "test"), scrypt: .testing) }

    func remove() { try? FileManager.default.removeItem(at: root) }

    func request(_ accounts: AccountStore? = nil, name: String = "kitchen") async throws -> PairingRequest {
        try await PairingRequest.start(deviceName: name, accounts: accounts ?? newcomer,
                                       options: .init(host: "127.0.0.1", announce: false, stepTimeout: .seconds(10)), logger: Logger(label: "test"))
    }

    /// Whether `accounts` holds no account and is signed out: nothing was admitted there.
    static func isEmpty(_ accounts: AccountStore) throws -> Bool {
        try accounts.accounts().isEmpty && accounts.currentAccountID() == nil
    }

    func memberKnows(_ device: DeviceID) throws -> Bool {
        try AccountStore(directory: member.directory, logger: Logger(label: "test")).knownDevices(of: memberIdentity.account.id).device(device) != nil
    }
}

/// What each device's screen shows, for a "person" who compares them.
final class Screens: Sendable {
    private let shown = Locked<[String: PairingCode]>([:])
    /// Signalled when a screen shows a code: what ``code(on:within:)`` waits on.
    private let changes = ChangeSignal()

    func show(_ code: PairingCode, on screen: String) {
        shown.withLock { $0[screen] = code }
        changes.signal()
    }

    /// The code `screen` shows, waiting for it up to `timeout`.
    func code(on screen: String, within timeout: Duration = .seconds(20)) async -> PairingCode? {
        _ = await ChangeSignal.waitUntil(ContinuousClock.now + timeout, observing: { [changes] }) { shown.withLock { $0[screen] } != nil }
        return shown.withLock { $0[screen] }
    }

    /// A person at `screen` who approves when `other` shows the same code.
    func person(at screen: String, comparingWith other: String) -> @Sendable (PairingOffer) async -> PairingDecision {
        { offer in
            self.show(offer.code, on: screen)
            let seen = await self.code(on: other)
            return seen == offer.code ? .approve : .refuse("the codes differ")
        }
    }
}

@Suite("Pairing on the loopback interface", .timeLimit(.minutes(2)))
struct LoopbackPairingTests {
    @Test("A newcomer joins through a member with matching codes: both stores agree, each knows the other")
    func joins() async throws {
        let home = try Household()
        defer { home.remove() }
        let request = try await home.request()
        let screens = Screens()
        let joined = Task { try await request.waitForGrant(timeout: .seconds(60), confirm: screens.person(at: "kitchen", comparingWith: "laptop")) }
        let approver = try PairingApprover(accounts: home.member, logger: Logger(label: "test"))
        let approval = try await approver.approve(PairingCandidate(name: "kitchen", host: "127.0.0.1", port: request.port),
                                                  confirm: screens.person(at: "laptop", comparingWith: "kitchen"),
                                                  passphrase: { Household.passphrase })
        let identity = try await joined.value
        await request.close()

        #expect(await screens.code(on: "laptop") == screens.code(on: "kitchen"))
        #expect(identity.account.id == home.memberIdentity.account.id)
        #expect(identity.deviceName == "kitchen" && approval.deviceName == "kitchen")
        #expect(identity.deviceID == approval.deviceID && identity.deviceID == request.deviceID)
        #expect(approval.sentCAKey)
        // Stored and signed in, with the account key sealed as the member holds it.
        let stored = try #require(try home.newcomer.loadCurrentIdentity())
        #expect(stored.deviceID == identity.deviceID && stored.account.id == identity.account.id)
        #expect(try home.newcomer.caKeyStatus(identity.account.id) == home.member.caKeyStatus(identity.account.id))
        // The newcomer can in turn unlock it with the account passphrase.
        _ = try home.newcomer.loadAuthority(identity.account.id, passphrase: Household.passphrase)
        // Each notes the other among the account's devices (what hearth device list shows).
        #expect(try home.memberKnows(identity.deviceID))
        let newcomerKnows = try AccountStore(directory: home.newcomer.directory, logger: Logger(label: "test")).knownDevices(of: identity.account.id)
        #expect(newcomerKnows.device(home.memberIdentity.deviceID)?.name == "laptop")
    }

    @Test("A member may admit a device without the account key: it syncs, but cannot admit others")
    func withoutKey() async throws {
        let home = try Household()
        defer { home.remove() }
        let request = try await home.request()
        let screens = Screens()
        let joined = Task { try await request.waitForGrant(timeout: .seconds(60), confirm: screens.person(at: "kitchen", comparingWith: "laptop")) }
        let approval = try await PairingApprover(accounts: home.member, logger: Logger(label: "test"))
            .approve(PairingCandidate(name: "kitchen", host: "127.0.0.1", port: request.port), includeCAKey: false,
                     confirm: screens.person(at: "laptop", comparingWith: "kitchen"), passphrase: { Household.passphrase })
        let identity = try await joined.value
        await request.close()
        #expect(!approval.sentCAKey)
        #expect(try home.newcomer.caKeyStatus(identity.account.id) == .absent)
    }

    @Test("Codes that differ admit nothing: the member refuses, the newcomer stores nothing")
    func mismatchedCode() async throws {
        let home = try Household()
        defer { home.remove() }
        let request = try await home.request()
        let unlocked = Locked(false)
        let joined = Task { try await request.waitForGrant(timeout: .seconds(60)) { _ in .approve } }
        let approver = try PairingApprover(accounts: home.member, logger: Logger(label: "test"))
        await #expect {
            _ = try await approver.approve(PairingCandidate(name: "kitchen", host: "127.0.0.1", port: request.port),
                                           confirm: { offer in
                                               // The person typed what the newcomer shows, which is not this.
                                               PairingDecision.typed(offer.code.digits == "000000" ? "111111" : "000000", for: offer.code)
                                           },
                                           passphrase: { unlocked.withLock { $0 = true }; return Household.passphrase })
        } throws: { ($0 as? PairingError)?.code == .refused }
        await #expect {
            _ = try await joined.value
        } throws: { error in
            guard let error = error as? PairingError else { return false }
            return error.code == .refusedByPeer && error.message == "the codes differ"
        }
        await request.close()
        #expect(!unlocked.withLock { $0 })     // the passphrase was not even asked for
        #expect(try Household.isEmpty(home.newcomer))
        #expect(try !home.memberKnows(request.deviceID))
    }

    @Test("The newcomer's person refusing admits nothing, and the member learns it")
    func newcomerRefuses() async throws {
        let home = try Household()
        defer { home.remove() }
        let request = try await home.request()
        let screens = Screens()
        let joined = Task { try await request.waitForGrant(timeout: .seconds(60)) { offer in
            screens.show(offer.code, on: "kitchen")
            return .refuse("the codes differ")
        } }
        await #expect {
            _ = try await PairingApprover(accounts: home.member, logger: Logger(label: "test"))
                .approve(PairingCandidate(name: "kitchen", host: "127.0.0.1", port: request.port),
                         confirm: { offer in
                             // Decide only once the newcomer has ended, its refusal sent.
                             _ = await joined.result
                             return .approve
                         }, passphrase: { Household.passphrase })
        } throws: { error in
            guard let error = error as? PairingError else { return false }
            return error.code == .refusedByPeer && error.message == "the codes differ"
        }
        await #expect { _ = try await joined.value } throws: { ($0 as? PairingError)?.code == .refused }
        await request.close()
        #expect(try Household.isEmpty(home.newcomer))
        #expect(try !home.memberKnows(request.deviceID))
    }

    @Test("A wrong passphrase on the member admits nothing, and the newcomer is told why")
    func wrongPassphrase() async throws {
        let home = try Household()
        defer { home.remove() }
        let request = try await home.request()
        let screens = Screens()
        let joined = Task { try await request.waitForGrant(timeout: .seconds(60), confirm: screens.person(at: "kitchen", comparingWith: "laptop")) }
        await #expect {
            _ = try await PairingApprover(accounts: home.member, logger: Logger(label: "test"))
                .approve(PairingCandidate(name: "kitchen", host: "127.0.0.1", port: request.port),
                         confirm: screens.person(at: "laptop", comparingWith: "kitchen"), passphrase: { "not the passphrase" })
        } throws: { ($0 as? IdentityError)?.code == .wrongPassphrase }
        await #expect {
            _ = try await joined.value
        } throws: { error in
            guard let error = error as? PairingError else { return false }
            return error.code == .refusedByPeer && error.message.contains("passphrase")
        }
        await request.close()
        #expect(try Household.isEmpty(home.newcomer))
        #expect(try !home.memberKnows(request.deviceID))
    }

    @Test("A relay in the middle, with its own keys on each side, gets different codes on the two screens: nothing is admitted")
    func manInTheMiddle() async throws {
        let home = try Household()
        defer { home.remove() }
        // The relay: toward the newcomer, a member of an account of its own; toward the real member,
        // a newcomer named like the real one.
        let relayAccount = home.store("relay-member")
        _ = try relayAccount.createAccount(displayName: "Pairing home", passphrase: "relay", deviceName: "laptop")
        let relayFacingMember = try await home.request(home.store("relay-newcomer"), name: "kitchen")
        let request = try await home.request()
        let screens = Screens()
        let joined = Task { try await request.waitForGrant(timeout: .seconds(60), confirm: screens.person(at: "kitchen", comparingWith: "laptop")) }
        // The relay approves whatever it sees, and asks the real newcomer while the member talks to it.
        let relayJoined = Task { try await relayFacingMember.waitForGrant(timeout: .seconds(60)) { offer in
            screens.show(offer.code, on: "relay toward laptop")
            return .approve
        } }
        let relayGrant = Task {
            try await PairingApprover(accounts: relayAccount, logger: Logger(label: "test"))
                .approve(PairingCandidate(name: "kitchen", host: "127.0.0.1", port: request.port),
                         confirm: { offer in screens.show(offer.code, on: "relay toward kitchen"); return .approve },
                         passphrase: { "relay" })
        }
        // The real member, tricked into dialling the relay.
        await #expect {
            _ = try await PairingApprover(accounts: home.member, logger: Logger(label: "test"))
                .approve(PairingCandidate(name: "kitchen", host: "127.0.0.1", port: relayFacingMember.port),
                         confirm: screens.person(at: "laptop", comparingWith: "kitchen"), passphrase: { Household.passphrase })
        } throws: { ($0 as? PairingError)?.code == .refused }
        await #expect { _ = try await joined.value } throws: { $0 is PairingError }
        _ = try? await relayJoined.value
        _ = try? await relayGrant.value
        await request.close()
        await relayFacingMember.close()

        let laptop = try #require(await screens.code(on: "laptop"))
        let kitchen = try #require(await screens.code(on: "kitchen"))
        // Each leg's code is computed with the relay's key on one side, so they differ (but for a
        // one-in-a-million accident), and each matches the relay's view of its own leg.
        #expect(laptop != kitchen)
        #expect(await screens.code(on: "relay toward laptop") == laptop)
        #expect(await screens.code(on: "relay toward kitchen") == kitchen)
        #expect(try Household.isEmpty(home.newcomer))
        #expect(try Household.isEmpty(home.store("relay-newcomer")))
        #expect(try !home.memberKnows(request.deviceID))
    }
}

/// A member written by hand, to send what the library's member never sends.
struct RawMember {
    let identity: DeviceIdentity

    /// Connects to `port` and runs `body` with a writer and a reader of messages.
    func session<T: Sendable>(port: Int, _ body: (RawSession) async throws -> T) async throws -> T {
        let transport = try PeerTransport(pairing: PairingTLSConfiguration(identity: identity, logger: Logger(label: "test")),
                                          maximumFrameLength: PairingMessage.maximumFrameLength)
        let connection = try await transport.connect(host: "127.0.0.1", port: port)
        let peerKey = try #require(connection.peer.certificate.publicKey)
        return try await connection.executeThenClose { inbound, outbound in
            try await body(RawSession(identity: identity, peerKey: peerKey, iterator: inbound.makeAsyncIterator(), outbound: outbound))
        }
    }

    /// One connection's writer and its only reader (NIO allows one iterator per connection).
    final class RawSession {
        let identity: DeviceIdentity
        let peerKey: Ed25519PublicKey
        private var iterator: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
        let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>

        init(identity: DeviceIdentity, peerKey: Ed25519PublicKey, iterator: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
             outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) {
            self.identity = identity
            self.peerKey = peerKey
            self.iterator = iterator
            self.outbound = outbound
        }

        func send(_ message: PairingMessage) async throws { try await outbound.write(ByteBuffer(bytes: try message.encoded())) }

        /// The next message, or nil when the connection ended.
        func next() async throws -> PairingMessage? {
            guard let frame = try await iterator.next() else { return nil }
            return try PairingMessage.decode(Data(frame.readableBytesView))
        }

        /// Hello, nonce, reveal, as a member does; returns the code.
        func exchange() async throws -> PairingCode {
            let nonce = [UInt8](repeating: 5, count: 32)
            let myKey = identity.privateKey.publicKey
            try await send(.hello(commitment: PairingCode.commitment(memberKey: myKey.rawRepresentation,
                                                                     newcomerKey: peerKey.rawRepresentation, memberNonce: nonce)))
            guard case .nonce(let theirs)? = try await next() else { throw PairingError(code: .malformed, message: "no nonce") }
            try await send(.reveal(nonce))
            return PairingCode(memberKey: myKey, newcomerKey: peerKey, memberNonce: nonce, newcomerNonce: theirs)
        }
    }
}

@Suite("Pairing against a member that breaks the rules", .timeLimit(.minutes(2)))
struct HostilePairingTests {
    @Test("A grant without a hello is refused, admits nothing, and the request waits on for a real member")
    func grantFirst() async throws {
        let home = try Household()
        defer { home.remove() }
        let request = try await home.request()
        let screens = Screens()
        let joined = Task { try await request.waitForGrant(timeout: .seconds(60), confirm: screens.person(at: "kitchen", comparingWith: "laptop")) }
        let authority = try home.member.loadAuthority(home.memberIdentity.account.id, passphrase: Household.passphrase)
        let key = try Ed25519PublicKey(rawRepresentation: [UInt8](repeating: 0, count: 31) + [1])
        let stray = try authority.issueDeviceCertificate(for: key, deviceName: "kitchen")
        let ended = try await RawMember(identity: home.memberIdentity).session(port: request.port) { session in
            try await session.send(.grant(PairingGrant(caCertificate: authority.account.caCertificate.derEncoded,
                                                       certificate: stray.derEncoded, sealedCAKey: nil)))
            return try await session.next()
        }
        #expect(ended == nil)   // closed without a word
        #expect(try Household.isEmpty(home.newcomer))
        // Still waiting: a real member gets through.
        _ = try await PairingApprover(accounts: home.member, logger: Logger(label: "test"))
            .approve(PairingCandidate(name: "kitchen", host: "127.0.0.1", port: request.port),
                     confirm: screens.person(at: "laptop", comparingWith: "kitchen"), passphrase: { Household.passphrase })
        #expect(try await joined.value.account.id == home.memberIdentity.account.id)
        await request.close()
    }

    @Test("A second member while one is pairing is told busy; a nonce that does not open its commitment ends only that attempt")
    func busyAndCommitment() async throws {
        let home = try Household()
        defer { home.remove() }
        let request = try await home.request()
        let screens = Screens()
        let joined = Task { try await request.waitForGrant(timeout: .seconds(60), confirm: screens.person(at: "kitchen", comparingWith: "laptop")) }
        let raw = RawMember(identity: home.memberIdentity)
        let busy = try await raw.session(port: request.port) { session in
            try await session.send(.hello(commitment: [UInt8](repeating: 9, count: 32)))
            _ = try await session.next()   // the nonce: this session holds the request now
            let second = try await raw.session(port: request.port) { try await $0.next() }
            // Reveal a nonce that does not open the commitment sent.
            try await session.send(.reveal([UInt8](repeating: 1, count: 32)))
            return (second, try await session.next())
        }
        #expect(busy.0 == .refused(reason: "busy: this device is pairing with another member"))
        #expect(busy.1 == .refused(reason: "the nonce does not open the commitment"))
        #expect(await screens.code(on: "kitchen", within: .milliseconds(100)) == nil)   // no code was shown
        _ = try await PairingApprover(accounts: home.member, logger: Logger(label: "test"))
            .approve(PairingCandidate(name: "kitchen", host: "127.0.0.1", port: request.port),
                     confirm: screens.person(at: "laptop", comparingWith: "kitchen"), passphrase: { Household.passphrase })
        #expect(try await joined.value.deviceName == "kitchen")
        await request.close()
    }

    @Test("A grant from a member of another account, or for another key, does not check out: nothing is stored")
    func invalidGrants() async throws {
        let home = try Household()
        defer { home.remove() }
        let other = home.store("other")
        _ = try other.createAccount(displayName: "Elsewhere", passphrase: "other", deviceName: "laptop")
        let otherAuthority = try other.loadAuthority(try #require(try other.currentAccountID()), passphrase: "other")
        let ownAuthority = try home.member.loadAuthority(home.memberIdentity.account.id, passphrase: Household.passphrase)

        for attempt in ["another account's CA", "a certificate for another key"] {
            let request = try await home.request()
            let joined = Task { try await request.waitForGrant(timeout: .seconds(60)) { _ in .approve } }
            let answer = try await RawMember(identity: home.memberIdentity).session(port: request.port) { session in
                _ = try await session.exchange()
                let grant: PairingGrant
                if attempt == "another account's CA" {
                    // Consistent in itself, but the member that showed the code is not of that account.
                    let certificate = try otherAuthority.issueDeviceCertificate(for: session.peerKey, deviceName: "kitchen")
                    grant = PairingGrant(caCertificate: otherAuthority.account.caCertificate.derEncoded,
                                         certificate: certificate.derEncoded, sealedCAKey: nil)
                } else {
                    let certificate = try ownAuthority.issueDeviceCertificate(for: try Ed25519PrivateKey().publicKey, deviceName: "kitchen")
                    grant = PairingGrant(caCertificate: ownAuthority.account.caCertificate.derEncoded,
                                         certificate: certificate.derEncoded, sealedCAKey: nil)
                }
                try await session.send(.grant(grant))
                return try await session.next()
            }
            guard case .refused(let reason)? = answer else {
                Issue.record("\(attempt): expected a refusal, got \(String(describing: answer))")
                continue
            }
            #expect(reason.hasPrefix("the grant does not check out"), "\(attempt): \(reason)")
            await #expect { _ = try await joined.value } throws: { ($0 as? PairingError)?.code == .invalidGrant }
            await request.close()
            #expect(try Household.isEmpty(home.newcomer), "\(attempt)")
        }
    }

    @Test("Pairing and sync handshakes do not mix: a sync peer cannot reach a pairing listener, nor the other way round")
    func separateHandshakes() async throws {
        let home = try Household()
        defer { home.remove() }
        let request = try await home.request()
        let sync = try PeerTransport(identity: home.memberIdentity, logger: Logger(label: "test"))
        await #expect(throws: TLSError.self) { _ = try await sync.connect(host: "127.0.0.1", port: request.port) }

        let listener = try await sync.listen(host: "127.0.0.1", port: 0)
        let pairing = try PeerTransport(pairing: PairingTLSConfiguration.selfSigned(deviceName: "kitchen", logger: Logger(label: "test")),
                                        maximumFrameLength: PairingMessage.maximumFrameLength)
        await #expect {
            let connection = try await pairing.connect(host: "127.0.0.1", port: try #require(listener.port))
            // A refused TLS 1.3 client may learn it only at its first read.
            try await connection.executeThenClose { inbound, _ in for try await _ in inbound {} }
        } throws: { $0 is TLSError }
        await listener.close()
        await request.close()
        #expect(try Household.isEmpty(home.newcomer))
    }
}

@Suite("Pairing with a person who never answers", .timeLimit(.minutes(1)))
struct StubbornPersonTests {
    /// A person who never answers, and ignores cancellation too.
    static let stubborn: @Sendable (PairingOffer) async -> PairingDecision = { _ in
        await withUnsafeContinuation { continuation in
            DispatchQueue.global().asyncAfter(deadline: .now() + 3600) { continuation.resume(returning: .approve) }
        }
    }

    @Test("The member refusing ends the newcomer's wait at once, its person still deciding")
    func memberRefuses() async throws {
        let home = try Household()
        defer { home.remove() }
        let request = try await home.request()
        let joined = Task { try await request.waitForGrant(timeout: .seconds(60), confirm: Self.stubborn) }
        let started = ContinuousClock.now
        await #expect(throws: PairingError.self) {
            _ = try await PairingApprover(accounts: home.member, logger: Logger(label: "test"))
                .approve(PairingCandidate(name: "kitchen", host: "127.0.0.1", port: request.port),
                         confirm: { _ in .refuse("the codes differ") }, passphrase: { Household.passphrase })
        }
        await #expect { _ = try await joined.value } throws: { ($0 as? PairingError)?.code == .refusedByPeer }
        // Not the 60 s of its own wait (10 s was too little for the whole suite beside it).
        #expect(ContinuousClock.now - started < .seconds(45))
        await request.close()
        #expect(try Household.isEmpty(home.newcomer))
    }

    @Test("The newcomer timing out ends the member's wait at once, its person still deciding")
    func newcomerTimesOut() async throws {
        let home = try Household()
        defer { home.remove() }
        let request = try await home.request()
        // Long enough for the member to reach its person first on a loaded machine (with 3 s it
        // sometimes arrived after the newcomer had stopped listening, and was just cut off).
        let joined = Task { try await request.waitForGrant(timeout: .seconds(15)) { _ in .approve } }
        let started = ContinuousClock.now
        await #expect {
            _ = try await PairingApprover(accounts: home.member, logger: Logger(label: "test"))
                .approve(PairingCandidate(name: "kitchen", host: "127.0.0.1", port: request.port),
                         confirm: Self.stubborn, passphrase: { Household.passphrase })
        } throws: { error in
            guard let error = error as? PairingError else { return false }
            return error.code == .refusedByPeer && error.message.contains("stopped waiting")
        }
        await #expect { _ = try await joined.value } throws: { ($0 as? PairingError)?.code == .timedOut }
        // Not the stubborn person's hour (15 s was too little for the whole suite beside it).
        #expect(ContinuousClock.now - started < .seconds(45))
        await request.close()
        #expect(try Household.isEmpty(home.newcomer))
        #expect(try !home.memberKnows(request.deviceID))
    }
}
