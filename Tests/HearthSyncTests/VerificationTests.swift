import Foundation
import Hearth
import HearthCore
import HearthIdentity
import HearthTesting
import HearthSync
import HearthTransport
import NIOCore
import Testing

/// A peer that is a real device of the account but misbehaves: it speaks the protocol by
/// hand over a real TLS connection.
@Suite("Verification of what peers send")
struct VerificationTests {
    /// Joins the cluster's account as a new device and connects to store 0.
    func rogue(_ cluster: SyncCluster) async throws -> (DeviceIdentity, PeerConnection) {
        let owner = AccountStore(directory: URL(fileURLWithPath: cluster.accountDirectories[0]))
        let account = try #require(try owner.currentAccountID())
        let bundle = try owner.exportJoinBundle(account, passphrase: "p")
        let identity = try AccountStore(directory: URL(fileURLWithPath: "\(cluster.root)/rogue"))
            .importJoinBundle(bundle, passphrase: "p", deviceName: "rogue")
        let connection = try await PeerTransport(identity: identity).connect(host: "127.0.0.1", port: cluster.ports[0])
        return (identity, connection)
    }

    func hello(_ identity: DeviceIdentity, store: String) throws -> SyncMessage {
        var hello = SyncMessage.Hello(protocolVersion: 1, account: identity.account.id.hex, store: store,
                                      device: identity.deviceID.data, vector: VersionVector(), signature: Data())
        hello.signature = Data(try identity.privateKey.signature(for: hello.signingBytes))
        return .hello(hello)
    }

    /// Sends `messages` after the hello and returns whether the store closed the connection.
    func send(_ messages: [SyncMessage], as identity: DeviceIdentity, over connection: PeerConnection,
              store: String) async throws -> Bool {
        try await connection.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(bytes: try hello(identity, store: store).encoded()))
            for message in messages { try await outbound.write(ByteBuffer(bytes: message.encoded())) }
            do {
                for try await _ in inbound {}          // read until the store closes
            } catch {}
            return true
        }
    }

    @Test("An authenticated peer relaying an entry with a forged signature is refused; nothing is applied")
    func forgedSignature() async throws {
        let cluster = try await SyncCluster(count: 2)
        defer { Task { await cluster.shutdown() } }
        let (identity, connection) = try await rogue(cluster)
        // An entry claiming to come from device 1, but signed with the rogue's key.
        var entry = Entry(key: "forged", value: "evil", timestamp: HLCTimestamp(milliseconds: HybridLogicalClock.wallMilliseconds(), counter: 0),
                          origin: ReplicaID.random(), sequence: 1)
        let genuine = try identity.sign(entry: entry, storeIdentifier: cluster.storeIdentifier)
        entry.signature = EntrySignature(signer: cluster.deviceIDs[1].data, bytes: genuine.bytes)
        let honest = try identity.signed(Entry(key: "honest", value: "ok", timestamp: entry.timestamp, origin: entry.origin, sequence: 2),
                                         storeIdentifier: cluster.storeIdentifier)
        let delta = SyncMessage.Delta(entries: [honest, entry], certificates: [Data(identity.certificate.derEncoded)],
                                      vector: VersionVector([entry.origin: 2]))
        let closed = try await send([.delta(delta)], as: identity, over: connection, store: cluster.storeIdentifier)
        #expect(closed)
        #expect(cluster.stores[0].object(forKey: "forged") == nil)
        #expect(cluster.stores[0].object(forKey: "honest") == nil)      // the whole delta is refused
        #expect(cluster.stores[0].replica.vector[entry.origin] == 0)
    }

    @Test("A tampered value under a genuine signature is refused")
    func tamperedValue() async throws {
        let cluster = try await SyncCluster(count: 1)
        defer { Task { await cluster.shutdown() } }
        let (identity, connection) = try await rogue(cluster)
        var entry = try identity.signed(Entry(key: "k", value: "signed", timestamp: HLCTimestamp(milliseconds: HybridLogicalClock.wallMilliseconds(), counter: 0),
                                              origin: ReplicaID.random(), sequence: 1), storeIdentifier: cluster.storeIdentifier)
        entry.value = "tampered"
        let delta = SyncMessage.Delta(entries: [entry], certificates: [Data(identity.certificate.derEncoded)], vector: VersionVector())
        _ = try await send([.delta(delta)], as: identity, over: connection, store: cluster.storeIdentifier)
        #expect(cluster.stores[0].object(forKey: "k") == nil)
    }

    @Test("A hello for another store exchanges no data")
    func wrongStore() async throws {
        let cluster = try await SyncCluster(count: 1)
        defer { Task { await cluster.shutdown() } }
        cluster.stores[0].set("secret", forKey: "k")
        let (identity, connection) = try await rogue(cluster)
        let received = try await connection.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(bytes: try hello(identity, store: "com.example.other").encoded()))
            var messages: [SyncMessage] = []
            do {
                for try await frame in inbound { messages.append(try SyncMessage(decoding: Data(frame.readableBytesView))) }
            } catch {}
            return messages
        }
        // The store's own hello may arrive (it is sent first), but never a delta.
        #expect(!received.contains { if case .delta = $0 { true } else { false } })
    }

    @Test("Malformed frames close the connection without harm")
    func garbage() async throws {
        let cluster = try await SyncCluster(count: 1)
        defer { Task { await cluster.shutdown() } }
        let (_, connection) = try await rogue(cluster)
        try await connection.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(bytes: Array("not a property list".utf8)))
            do { for try await _ in inbound {} } catch {}
        }
        cluster.stores[0].set("still fine", forKey: "k")
        #expect(cluster.stores[0].string(forKey: "k") == "still fine")
    }
}

extension VerificationTests {
    @Test("A certificate saved with the replica that the account CA did not sign is ignored, with a log line")
    func foreignSavedCertificate() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-saved-cert-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let owner = try AccountStore(directory: URL(fileURLWithPath: "\(root)/config")).createAccount(displayName: "Home")
        let stranger = try AccountAuthority.create(displayName: "Elsewhere").makeDevice(named: "stranger")
        // A replica file holding an entry signed by the stranger, with its certificate, as a
        // tampered or mixed-up file might.
        var replica = Replica()
        let written = replica.write("planted", forKey: "k")
        let entry = try #require(written)
        let signed = try stranger.signed(entry, storeIdentifier: "com.example.saved")
        replica.attach(try #require(signed.signature), forKey: "k", origin: entry.origin, sequence: entry.sequence)
        replica.keepCertificate(Data(stranger.certificate.derEncoded), signer: stranger.deviceID.data)
        let location = StoreLocation(dataDirectory: "\(root)/data", storeIdentifier: "com.example.saved", account: owner.account.id.hex)
        try FileManager.default.createDirectory(atPath: location.directory, withIntermediateDirectories: true)
        try ReplicaFile.encode(replica, header: .init(storeIdentifier: "com.example.saved", account: owner.account.id.hex))
            .write(to: URL(fileURLWithPath: location.filePath))

        let capture = LogCapture()
        let sync = SyncSettings(accountDirectory: "\(root)/config", discovery: .none, listenHost: "127.0.0.1")
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
