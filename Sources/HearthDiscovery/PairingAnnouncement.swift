/// What a device asking to join an account publishes on the LAN (`_hearth-pair._tcp`), so that
/// `hearth device approve` on a member finds it: the device name as the instance name, the TCP
/// port of its pairing listener, and a TXT record of two fields (docs/protocol.md, "Pairing").
///
/// Like the sync service's, the record is a hint for whom to dial, never trusted: the pairing
/// code the people compare decides who is who.
package struct PairingAnnouncement: Sendable, Hashable {
    /// The DNS-SD service type of pairing requests.
    package static let serviceType = "_hearth-pair._tcp"

    /// The pairing protocol version this build speaks (TXT key `v`).
    package static let currentVersion = 1

    /// TXT keys.
    package enum Key {
        /// The pairing protocol version, decimal.
        package static let version = "v"
        /// A short hash of the newcomer's public key, lowercase hex.
        package static let key = "k"
    }

    /// The device name (cut to 63 bytes of UTF-8); Avahi may publish it as "kitchen #2" after a
    /// collision.
    package var instanceName: String
    /// The TCP port of the pairing listener.
    package var port: UInt16
    /// The pairing protocol version.
    package var version: Int
    /// Lowercase hex, 8 to 64 characters: the caller's short hash of the key the listener
    /// presents (Hearth uses SHA-256("hearth-mdns-pair-v1" 00 · raw public key), cut to 16).
    package var keyHash: String

    package init(instanceName: String, port: UInt16, version: Int = Self.currentVersion, keyHash: String) {
        self.instanceName = ServiceDescription.truncatedInstanceName(instanceName)
        self.port = port
        self.version = version
        self.keyHash = keyHash
    }

    /// The TXT strings to publish.
    package var txtStrings: [String] { ["\(Key.version)=\(version)", "\(Key.key)=\(keyHash)"] }

    /// The version and key hash of a request's TXT record, validated as untrusted input (the
    /// size caps and rules of ``ServiceRecord/parse(txt:)``).
    package static func parse(txt entries: [[UInt8]]) -> Result<(version: Int, keyHash: String), ServiceRecord.Rejection> {
        let fields: [String: String]
        switch ServiceRecord.fields(txt: entries) {
        case .failure(let rejection): return .failure(rejection)
        case .success(let parsed): fields = parsed
        }
        let version: Int
        switch ServiceRecord.version(in: fields) {
        case .failure(let rejection): return .failure(rejection)
        case .success(let parsed): version = parsed
        }
        guard let hash = fields[Key.key] else { return .failure(.missingKey(Key.key)) }
        guard ServiceRecord.isValidHash(hash) else { return .failure(.invalidValue(key: Key.key)) }
        return .success((version, hash))
    }

    /// The request a browsed peer announces, or nil when its TXT record is not one.
    package init?(peer: DiscoveredPeer) {
        guard let version = peer.txt[Key.version].flatMap(Int.init), let hash = peer.txt[Key.key],
              ServiceRecord.isValidHash(hash) else { return nil }
        self.init(instanceName: peer.name, port: peer.port, version: version, keyHash: hash)
    }

    /// Checks what a member would check, so that a request is never published in a form members ignore.
    package func validate() throws(DiscoveryError) {
        if instanceName.isEmpty { throw .invalidServiceDescription("instance name is empty") }
        if port == 0 { throw .invalidServiceDescription("port 0 cannot be connected to") }
        if case .failure(let rejection) = Self.parse(txt: txtStrings.map { Array($0.utf8) }) {
            throw .invalidServiceDescription(rejection.description)
        }
    }

    var avahiSpec: AvahiServiceSpec { Self.spec(publishing: self) }

    /// Publishing `announcement` (a newcomer), or browsing requests (a member, nil). A member
    /// reports requests of the pairing version it speaks and skips the others quietly.
    static func spec(publishing announcement: PairingAnnouncement?) -> AvahiServiceSpec {
        AvahiServiceSpec(
            serviceType: serviceType,
            publication: announcement.map { .init(instanceName: $0.instanceName, port: $0.port, txt: $0.txtStrings) },
            browses: announcement == nil,
            judge: { entries in
                switch parse(txt: entries) {
                case .failure(let rejection): return .malformed(rejection.description)
                case .success(let parsed): return parsed.version == currentVersion ? .accept(nil) : .foreign
                }
            })
    }
}
