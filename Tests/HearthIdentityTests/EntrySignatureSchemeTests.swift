import Foundation
import HearthCore
import HearthIdentity
import Testing

/// The signature scheme is a device's, given with its identity (issue 27: no process-wide
/// switch): the simulator's fast stand-in and Ed25519 side by side in one process.
@Suite("Entry signature schemes, per device")
struct EntrySignatureSchemeTests {
    static let store = "com.example.notes"
    static let entry = Entry(key: "colour", value: .string("blue"), timestamp: HLCTimestamp(milliseconds: 1_700_000_000_000, counter: 1),
                             origin: ReplicaID(high: 1, low: 2), sequence: 1)

    @Test("An identity signs with its scheme and a cache verifies with its own: each refuses the other's, in one process")
    func perDevice() throws {
        let authority = try AccountAuthority.create(displayName: "Schemes")
        let real = try authority.makeDevice(named: "real")
        let other = try authority.makeDevice(named: "fast")
        let fast = try DeviceIdentity(account: other.account, privateKey: other.privateKey, certificate: other.certificate, signatures: .simulated)
        #expect(real.signatures == .ed25519)
        #expect(fast.signatures == .simulated)

        let realCache = DeviceCertificateCache(trust: authority.account.trust)
        let fastCache = DeviceCertificateCache(trust: authority.account.trust, signatures: .simulated)
        for cache in [realCache, fastCache] {
            try cache.admit(real.certificate)
            try cache.admit(fast.certificate)
        }
        let byReal = try real.signed(Self.entry, storeIdentifier: Self.store)
        let byFast = try fast.signed(Self.entry, storeIdentifier: Self.store)
        // The stand-in: a SHA-256 twice over, not the key's Ed25519 signature of the same entry.
        let fastBytes = try #require(byFast.signature?.bytes)
        #expect(fastBytes.count == 64 && fastBytes.prefix(32) == fastBytes.suffix(32))
        #expect(try other.signed(Self.entry, storeIdentifier: Self.store).signature?.bytes != fastBytes)

        try realCache.verify(entry: byReal, storeIdentifier: Self.store)
        try fastCache.verify(entry: byFast, storeIdentifier: Self.store)
        for (cache, entry) in [(realCache, byFast), (fastCache, byReal)] {
            #expect { try cache.verify(entry: entry, storeIdentifier: Self.store) } throws: { ($0 as? IdentityError)?.code == .badSignature }
        }
        // The stand-in still binds the signed bytes: another store's name fails.
        #expect { try fastCache.verify(entry: byFast, storeIdentifier: "com.example.other") } throws: { ($0 as? IdentityError)?.code == .badSignature }
    }
}
