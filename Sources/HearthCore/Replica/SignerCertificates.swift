import Foundation

/// The DER certificates of devices that signed entries, by signer (device ID bytes): part of a
/// ``Replica``.
///
/// Kept with the entries so that a replica can prove them to a peer after a restart, even while
/// their signer is away: a relayed entry travels with its signer's certificate. Opaque here; the
/// sync engine checks each one against the account CA when it loads them. Its own type because
/// what it keeps and what is worth saving is one concern, apart from the entries' merging.
package struct SignerCertificates: Sendable, Equatable {
    /// The certificates, by signer.
    package private(set) var bySigner: [Data: Data]

    package init(_ bySigner: [Data: Data] = [:]) {
        self.bySigner = bySigner
    }

    /// Remembers `der` as the certificate of `signer` (whose entries the replica may hold).
    package mutating func keepCertificate(_ der: Data, signer: Data) {
        bySigner[signer] = der
    }

    /// The certificates of the devices that signed one of `entries`: what is worth saving.
    package func certificatesInUse(by entries: some Sequence<Entry>) -> [Data: Data] {
        let signers = Set(entries.compactMap { $0.signature?.signer })
        return bySigner.filter { signers.contains($0.key) }
    }
}
