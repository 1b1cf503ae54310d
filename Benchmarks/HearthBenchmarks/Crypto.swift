import Foundation
import Logging
import HearthCore
import HearthIdentity

/// What each cryptographic step of the sync path costs per call, in this process, so the
/// figures above can be read as sums of these (µs per call, median of 5 runs).
enum CryptoCosts {
    /// The entry every measurement signs and verifies: a 1 KB value, as in the reconnect figure.
    static func sampleEntry() -> Entry {
        Entry(key: "key-0017", value: .data(randomData(1000)), timestamp: HLCTimestamp(milliseconds: 1_700_000_000_000, counter: 1),
              origin: ReplicaID.random(), sequence: 42)
    }

    static func measure(identity: DeviceIdentity, quick: Bool) throws -> [(String, Double)] {
        let store = "com.example.bench"
        let entry = sampleEntry()
        let signed = try identity.signed(entry, storeIdentifier: store)
        let certificate = identity.certificate
        let der = certificate.derEncoded
        let trust = identity.account.trust
        guard let key = certificate.publicKey, let signature = signed.signature else { throw BenchError("no key") }
        let bytes = signed.signingBytes(storeIdentifier: store)
        let cache = DeviceCertificateCache(trust: trust)
        let rounds = quick ? 50 : 400
        // Issue 14: the removal checks, in a household of its own (its CA signs 16 removals of
        // other devices; the member below is not removed, as in every honest exchange).
        let household = try AccountAuthority.create(displayName: "Bench removals")
        let member = try household.makeDevice(named: "member")
        let memberEntry = try member.signed(entry, storeIdentifier: store)
        let removals = DeviceRemovals(trust: household.account.trust, logger: Logger(label: "hearth.bench"))
        removals.merge(try (0..<16).map { i in try household.removal(of: household.makeDevice(named: "gone \(i)").deviceID, named: "gone \(i)") })

        func cost(_ body: () throws -> Void) rethrows -> Double {
            var runs: [Double] = []
            for _ in 0..<5 {
                let start = monotonicNanoseconds()
                for _ in 0..<rounds { try body() }
                runs.append(Double(monotonicNanoseconds() - start) / Double(rounds) / 1e3)
            }
            return median(runs)
        }
        var ok = true
        return [
            ("sign an entry (Ed25519, `DeviceIdentity.signed`)", try cost { _ = try identity.signed(entry, storeIdentifier: store) }),
            ("verify an entry's signature alone (`Ed25519PublicKey.isValidSignature`)", cost { ok = ok && key.isValidSignature(signature.bytes, for: bytes) }),
            ("validate a device certificate (`AccountTrust.validateDevice`: X509_verify_cert)", try cost { _ = try trust.validateDevice(certificate) }),
            ("verify an entry as the engine does (`DeviceCertificateCache.verify`: validate + signature)", try cost {
                _ = try cache.admit(certificate)
                try cache.verify(entry: signed, storeIdentifier: store)
            } - (try cost { _ = try cache.admit(certificate) })),
            ("the removal check per entry (the lookup `DeviceCertificateCache.verify` adds; 16 removed devices)", cost {
                ok = ok && removals.removal(of: member.deviceID).map { memberEntry.timestamp.milliseconds > $0.removedAt } != true
            }),
            ("the removal check per handshake (the verify callback's work: the leaf's key, its device ID, the lookup; 16 removed)", cost {
                ok = ok && !removals.isRemoved(DeviceID(publicKey: member.certificate.publicKey!))
            }),
            ("parse a DER certificate (`Certificate(derEncoded:)`)", try cost { _ = try Certificate(derEncoded: der) }),
            ("admit a delta's certificate (`DeviceCertificateCache.admit(derEncoded:)`: parse + validate)", try cost { _ = try cache.admit(derEncoded: der) }),
            ("one guess at a join bundle's passphrase (`JoinBundle.open`, scrypt \(ScryptParameters.standard); median of 3)", try guessCost()),
        ]
    }

    /// Signing and verifying one 1 KB entry, ns per call (the crypto of the floor of a change).
    static func signAndVerify(identity: DeviceIdentity, rounds: Int) throws -> (sign: Double, verify: Double) {
        let entry = sampleEntry()
        let store = "com.example.bench"
        let signed = try identity.signed(entry, storeIdentifier: store)
        guard let key = identity.certificate.publicKey, let signature = signed.signature else { throw BenchError("no key") }
        let bytes = signed.signingBytes(storeIdentifier: store)
        var ok = true
        var start = monotonicNanoseconds()
        for _ in 0..<rounds { _ = try identity.signed(entry, storeIdentifier: store) }
        let sign = Double(monotonicNanoseconds() - start) / Double(rounds)
        start = monotonicNanoseconds()
        for _ in 0..<rounds { ok = ok && key.isValidSignature(signature.bytes, for: bytes) }
        let verify = Double(monotonicNanoseconds() - start) / Double(rounds)
        guard ok else { throw BenchError("a signature did not verify") }
        return (sign, verify)
    }

    /// An offline attacker's cost per guess: opening a bundle (written with the standard
    /// parameters) with a wrong passphrase, which runs scrypt once and fails the padding.
    static func guessCost() throws -> Double {
        let authority = try AccountAuthority.create(displayName: "Bench")
        let bundle = try JoinBundle.export(authority, passphrase: "the right one")
        var runs: [Double] = []
        for i in 0..<3 {
            let start = monotonicNanoseconds()
            _ = try? JoinBundle.open(bundle, passphrase: "guess \(i)")
            runs.append(Double(monotonicNanoseconds() - start) / 1e3)
        }
        return median(runs)
    }
}
