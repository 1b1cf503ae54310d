import Foundation
import Logging
import Hearth
import HearthCore
import HearthIdentity
import HearthTesting
import HearthSync
import HearthTransport
import NIOCore
import Testing

/// What a device of the account that misbehaves (``HostilePeer``) can get a store to apply.
@Suite("Verification of what peers send")
struct VerificationTests {
    func rogue(_ cluster: LoopbackCluster) async throws -> (HostilePeer, HostileLink) {
        let peer = try HostilePeer(joining: cluster)
        let link = try await peer.connect(port: cluster.ports[0])
        try link.send(try peer.greeting())
        return (peer, link)
    }

    @Test("An entry with a forged signature is refused alone: the rest of the delta applies, the sender is told, the link stays up")
    func forgedSignature() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 2, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let (peer, link) = try await rogue(cluster)
            // An entry claiming to come from device 1 (its signer, and an origin of device 1's), but
            // signed with the rogue's key.
            let stolen = ReplicaID.random(boundTo: cluster.deviceID(of: 1).data)
            var forged = try peer.entry("forged", "evil", origin: stolen, sequence: 1)
            forged.signature?.signer = cluster.deviceID(of: 1).data
            let honest = try peer.entry("honest", "ok", origin: peer.origin(), sequence: 2)
            try link.send(peer.delta([honest, forged], vector: VersionVector([stolen: 2])))
            let refusal = try #require(await link.nextRefusal())
            #expect(refusal.entries.count == 1)
            #expect(refusal.entries.first?.key == "forged")
            // Device 1's certificate does not verify the rogue's signature; if device 1 has not
            // connected yet, its certificate is not even known here. Either way: refused.
            #expect([.badSignature, .unknownSigner].contains(refusal.entries.first?.reason))
            #expect(cluster[0].object(forKey: "forged") == nil)
            #expect(cluster[0].string(forKey: "honest") == "ok")
            #expect(try await link.isAnswering())
            await link.close()
        }
    }

    @Test("A tampered value under a genuine signature is refused")
    func tamperedValue() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 1, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let (peer, link) = try await rogue(cluster)
            var entry = try peer.entry("k", "signed", origin: peer.origin(), sequence: 1)
            entry.value = "tampered"
            try link.send(peer.delta([entry]))
            let refusal = try #require(await link.nextRefusal())
            #expect(refusal.entries.map(\.reason) == [.badSignature])
            #expect(cluster[0].object(forKey: "k") == nil)
            await link.close()
        }
    }

    @Test("A hello listing only another store exchanges no data of this one, and the link stays up")
    func wrongStore() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 1, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            cluster[0].set("secret", forKey: "k")
            let peer = try HostilePeer(joining: cluster)
            let link = try await peer.connect(port: cluster.ports[0])
            try link.send(try peer.hello(stores: ["com.example.other"]))
            // A store of its own is no reason to part: the connection stays (answering pings), and
            // carries nothing of the store the peer does not serve.
            #expect(try await link.isAnswering())
            // Awaited, not slept: a second pong comes after anything the device would send about
            // the store (its mail goes before a pong), so nothing came and the link is still up.
            #expect(try await link.isAnswering())
            #expect(!link.isClosed)
            #expect(!link.all.contains { if case .delta = $0 { true } else { false } })
            #expect(!link.all.contains { if case .store = $0 { true } else { false } })
            #expect(cluster[0].connectedPeerCount == 0)
            await link.close()
        }
    }

    @Test("Malformed frames close the connection without harm")
    func garbage() async throws {
        try await withLoopbackCluster(network: InMemoryNetwork(), replicas: 1, linkTimeout: UnderLoad.linkTimeout,
                                      connectTimeout: UnderLoad.connectTimeout) { cluster in
            let peer = try HostilePeer(joining: cluster)
            let link = try await peer.connect(port: cluster.ports[0])
            link.send(raw: Array("not a property list".utf8))
            await link.close()
            cluster[0].set("still fine", forKey: "k")
            #expect(cluster[0].string(forKey: "k") == "still fine")
        }
    }
}

extension VerificationTests {
    @Test("A certificate saved with the replica that the account CA did not sign is ignored, with a log line")
    func foreignSavedCertificate() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-saved-cert-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let owner = try AccountStore(directory: URL(fileURLWithPath: "\(root)/config"), logger: Logger(label: "test"), scrypt: .testing).createAccount(displayName: "Home", passphrase: "p")
        let stranger = try AccountAuthority.create(displayName: "Elsewhere").makeDevice(named: "stranger")
        // A replica file holding an entry signed by the stranger, with its certificate, as a
        // tampered or mixed-up file might.
        var replica = Replica()
        let written = replica.write("planted", forKey: "k", wall: HybridLogicalClock.wallMilliseconds())
        let entry = try #require(written)
        let signed = try stranger.signed(entry, storeIdentifier: "com.example.saved")
        replica.attach(try #require(signed.signature), forKey: "k", origin: entry.origin, sequence: entry.sequence)
        replica.keepCertificate(Data(stranger.certificate.derEncoded), signer: stranger.deviceID.data)
        let location = StoreLocation(dataDirectory: "\(root)/data", storeIdentifier: "com.example.saved", account: owner.account.id.hex)
        try FileManager.default.createDirectory(atPath: location.directory, withIntermediateDirectories: true)
        try ReplicaFile.encode(replica, header: .init(storeIdentifier: "com.example.saved", account: owner.account.id.hex))
            .write(to: URL(fileURLWithPath: location.filePath))

        let capture = LogCapture()
        // The engine must start (it admits saved certificates then); a socket adds nothing.
        var sync = SyncSettings(accountDirectory: "\(root)/config", discovery: .none, listenHost: "127.0.0.1")
        sync.environment = InMemoryNetwork().environment()
        let store = try UbiquitousKeyValueStore(storeIdentifier: "com.example.saved",
                                                configuration: .init(dataDirectory: "\(root)/data", sync: sync,
                                                                     logger: capture.logger("hearth")))
        _ = try await store.syncPort()
        let record = await capture.waitFor("ignoring the saved certificate of device \(stranger.deviceID.hex.prefix(8))")
        #expect(record?.level == .warning)
        #expect(record?.message.contains("unable to get local issuer certificate") == true)
        await store.stopSync()
    }
}
