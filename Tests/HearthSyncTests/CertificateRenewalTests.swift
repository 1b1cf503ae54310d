import Foundation
import Logging
import HearthCore
import HearthIdentity
import HearthSync
import HearthTesting
import HearthTestSupport
import HearthTransport
import Testing

/// Certificates that age (issue 14): a device whose certificate is within its renewal window
/// gets a new one from a peer holding the unlocked account CA, without anyone doing anything on
/// it, and its peers accept the new certificate.
@Suite("Certificate renewal")
struct CertificateRenewalTests {
    static let store = "com.example.renewal"

    /// `timeout`: how long a silent link lives; a hostile peer sends no pings, so one whose link
    /// must stay up gets a long one.
    static func engine(_ identity: DeviceIdentity, authority: AccountAuthority? = nil,
                       timeout: Duration = .seconds(3), logger: Logger = Logger(label: "test"), network: InMemoryNetwork? = nil) async throws -> (SyncEngine, Int) {
        let replica = MemoryReplica(storeIdentifier: store, replica: Replica(id: .random(boundTo: identity.deviceID.data)))
        let engine = try SyncEngine(identity: identity, replica: replica,
                                    options: .init(host: "127.0.0.1", heartbeatInterval: .milliseconds(300), timeout: timeout),
                                    environment: network?.environment() ?? .system, logger: logger)
        engine.authority = authority
        return (engine, try await engine.start())
    }

    /// A device whose certificate expires in `days`.
    static func device(_ authority: AccountAuthority, _ name: String, expiringIn days: Double) throws -> DeviceIdentity {
        let now = Date()
        return try authority.makeDevice(named: name, notBefore: now.addingTimeInterval(-3600), notAfter: now.addingTimeInterval(days * 86_400))
    }

    /// On the in-memory network, which checks a certificate as the handshake does; that TLS
    /// presents the renewed certificate is `RenewedIdentityTests` (HearthTransportTests).
    @Test("A device 10 days from expiry renews from a peer with the CA unlocked, and a third device accepts the new certificate")
    func renewsFromUnlockedPeer() async throws {
        try await withCleanup { cleanup in
            let network = InMemoryNetwork()
            let authority = try AccountAuthority.create(displayName: "Renewal household")
            let a = try authority.makeDevice(named: "A"), c = try authority.makeDevice(named: "C")
            let b = try Self.device(authority, "B", expiringIn: 10)
            let (engineA, portA) = try await Self.engine(a, authority: authority, network: network)
            let (engineB, portB) = try await Self.engine(b, network: network)
            cleanup { await engineA.stop(); await engineB.stop() }
            let saved = Locked<[DeviceIdentity]>([])
            engineB.onCertificateRenewed = { [changes = engineB.changes] renewed in
                saved.withLock { $0.append(renewed) }
                changes.signal()   // the wait below looks at it
            }
            engineB.addPeer(host: "127.0.0.1", port: portA)
            let yearFromNow = Date().addingTimeInterval(300 * 86_400)
            try await engineB.until("B's certificate renewed") { engineB.currentIdentity.certificate.notValidAfter > yearFromNow }
            let renewed = engineB.currentIdentity
            #expect(renewed.deviceID == b.deviceID, "the same key, so the same device ID")
            #expect(renewed.deviceName == "B")
            // The handler runs just after the identity is swapped, outside the engine's lock: a test
            // thread can look in between (streak H2 at b4b2ca1, ThreadSanitizer beside 4 CPU hogs).
            try await engineB.until("the renewed certificate handed to the owner") { !saved.withLock { $0.isEmpty } }
            #expect(saved.withLock { $0.map(\.certificate) } == [renewed.certificate])
            _ = try authority.account.trust.validateDevice(renewed.certificate)

            // C, which never met A, accepts B's new certificate when it connects.
            let endpoint = try network.maker(PeerNetworkSetup(identity: c, removals: nil, removalNotice: nil, logger: Logger(label: "test")))
            let connection = try await endpoint.dial(host: "memory", port: portB, expecting: nil)
            #expect(connection.peer.deviceID == b.deviceID)
            #expect(connection.peer.certificate.notValidAfter > yearFromNow)
            await connection.close()
            // And a C engine syncs with it.
            let (engineC, _) = try await Self.engine(c, network: network)
            cleanup { await engineC.stop() }
            engineC.addPeer(host: "127.0.0.1", port: portB)
            try await engineC.until("C connected to B") { engineC.connectedPeers.contains(b.deviceID) }
        }
    }

    @Test("Without the unlocked CA nothing is issued; unlocking it later answers the request already made")
    func waitsForUnlock() async throws {
        try await withCleanup { cleanup in
            let network = InMemoryNetwork()
            let authority = try AccountAuthority.create(displayName: "Renewal household")
            let a = try authority.makeDevice(named: "A")
            let b = try Self.device(authority, "B", expiringIn: 10)
            let logsA = LogCapture()
            let (engineA, portA) = try await Self.engine(a, logger: logsA.logger("A"), network: network)
            let (engineB, _) = try await Self.engine(b, network: network)
            cleanup { await engineA.stop(); await engineB.stop() }
            engineB.addPeer(host: "127.0.0.1", port: portA)
            // Awaited, not slept: A has B's request, and leaves it unanswered while the CA is locked.
            #expect(await logsA.waitFor("the account CA is locked here") != nil)
            #expect(engineB.currentIdentity.certificate == b.certificate)
            engineA.authority = authority
            try await network.until("B's certificate renewed once A unlocked the CA") {
                engineB.currentIdentity.certificate.notValidAfter > Date().addingTimeInterval(300 * 86_400)
            }
        }
    }

    @Test("A peer that is not due gets nothing, and a certificate for another key or from another CA is ignored")
    func noRenewalAtWill() async throws {
        try await withCleanup { cleanup in
            let network = InMemoryNetwork()
            let authority = try AccountAuthority.create(displayName: "Renewal household")
            let a = try authority.makeDevice(named: "A")
            let (engineA, portA) = try await Self.engine(a, authority: authority, network: network)
            cleanup { await engineA.stop() }
            // A member far from expiry asks anyway.
            let member = HostilePeer(identity: try authority.makeDevice(named: "eager"), storeIdentifier: Self.store, network: network)
            let link = try await member.connect(port: portA)
            try link.send(try member.greeting())
            try link.send(.renew)
            #expect(await link.next(within: .seconds(2), where: { if case .certificate = $0 { true } else { false } }) == nil)
            await link.close()

            // B, due, is sent certificates it must not take.
            let b = try Self.device(authority, "B", expiringIn: 10)
            let (engineB, portB) = try await Self.engine(b, timeout: .seconds(90), network: network)
            cleanup { await engineB.stop() }
            let sender = HostilePeer(identity: try authority.makeDevice(named: "sender"), storeIdentifier: Self.store, network: network)
            let toB = try await sender.connect(port: portB)
            try toB.send(try sender.greeting())
            let otherKey = try authority.makeDevice(named: "B").certificate
            let otherCA = try Self.device(try AccountAuthority.create(displayName: "Other"), "B", expiringIn: 400).certificate
            let shorter = try authority.issueDeviceCertificate(for: b.privateKey.publicKey, deviceName: "B", notAfter: Date().addingTimeInterval(5 * 86_400))
            for certificate in [otherKey, otherCA, shorter] { try toB.send(.certificate(Data(certificate.derEncoded))) }
            #expect(try await toB.isAnswering(within: .seconds(30)))
            #expect(engineB.currentIdentity.certificate == b.certificate)
            await toB.close()
        }
    }

    @Test("A device whose certificate expired (it stopped renewing, or was removed) keeps its earlier writes: a relay hands them to a newcomer, which takes them and refuses one stamped after the expiry")
    func expiredSignerKeepsEarlierWrites() async throws {
        try await withCleanup { cleanup in
            let network = InMemoryNetwork()
            let authority = try AccountAuthority.create(displayName: "Renewal household")
            let now = Date()
            // (Within the account's first hour: its CA is backdated by an hour.)
            let retired = try authority.makeDevice(named: "old phone", notBefore: now.addingTimeInterval(-50 * 60),
                                                   notAfter: now.addingTimeInterval(-20 * 60))
            let newcomerIdentity = try authority.makeDevice(named: "newcomer")
            let replica = MemoryReplica(storeIdentifier: Self.store, replica: Replica(id: .random(boundTo: newcomerIdentity.deviceID.data)))
            let newcomer = try SyncEngine(identity: newcomerIdentity, replica: replica, options: .init(host: "127.0.0.1"), environment: network.environment(), logger: Logger(label: "test"))
            let port = try await newcomer.start()
            cleanup { await newcomer.stop() }
            let writer = HostilePeer(identity: retired, storeIdentifier: Self.store, network: network)
            let origin = writer.origin()
            let nowMilliseconds = UInt64(now.timeIntervalSince1970 * 1000)
            let early = try writer.entry("early", .string("while valid"), origin: origin, sequence: 1, at: nowMilliseconds - 40 * 60_000)
            let late = try writer.entry("late", .string("after expiry"), origin: origin, sequence: 2, at: nowMilliseconds - 10 * 60_000)
            let relay = HostilePeer(identity: try authority.makeDevice(named: "relay"), storeIdentifier: Self.store, network: network)
            let link = try await relay.connect(port: port)
            try link.send(try relay.greeting())
            try link.send(.delta(.init(store: Self.store, entries: [early, late], certificates: [Data(retired.certificate.derEncoded)],
                                       vector: VersionVector())))
            let refusal = try #require(await link.nextRefusal(within: .seconds(10)))
            #expect(refusal.entries.map(\.key) == ["late"], "\(refusal.entries)")
            try await network.until("the early write applied") { replica.replica.entries["early"] != nil }
            await link.close()

            // A renewal is not undone by the older certificate arriving later.
            let cache = DeviceCertificateCache(trust: authority.account.trust)
            let renewed = try authority.issueDeviceCertificate(for: retired.privateKey.publicKey, deviceName: "old phone")
            try cache.admit(renewed)
            try cache.admit(retired.certificate)
            #expect(cache.certificate(for: retired.deviceID) == renewed)
        }
    }

    @Test("A renewed certificate is saved for the next start; one for another key is refused")
    func savedCertificate() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-renewal-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let accounts = AccountStore(directory: directory, logger: Logger(label: "test"))
        let seed = try JoinBundleSeed.make()
        let identity = try accounts.importJoinBundle(seed.bundle, passphrase: seed.passphrase, deviceName: "B")
        let authority = seed.authority
        let renewed = try authority.issueDeviceCertificate(for: identity.privateKey.publicKey, deviceName: "B",
                                                           notAfter: Date().addingTimeInterval(400 * 86_400))
        try accounts.replaceDeviceCertificate(renewed, of: identity.account.id)
        #expect(try accounts.loadIdentity(identity.account.id).certificate == renewed)
        let foreign = try authority.makeDevice(named: "B").certificate
        #expect(throws: IdentityError.self) { try accounts.replaceDeviceCertificate(foreign, of: identity.account.id) }
        #expect(try accounts.loadIdentity(identity.account.id).certificate == renewed)
    }
}

/// An account's authority and a join bundle of it, sealed cheaply, for tests that need an
/// account on disk without going through the command.
struct JoinBundleSeed {
    let authority: AccountAuthority
    let bundle: Data
    let passphrase = "seed"

    static func make() throws -> JoinBundleSeed {
        let authority = try AccountAuthority.create(displayName: "Seed household")
        return JoinBundleSeed(authority: authority, bundle: try JoinBundle.export(authority, passphrase: "seed", scrypt: .testing))
    }
}
