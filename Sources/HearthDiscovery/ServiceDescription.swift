/// What this device publishes on the LAN: the DNS-SD instance name, the TCP port the
/// sync transport listens on, and the TXT fields peers use to decide whether to connect.
///
/// Discovery never sees account, store or device *names*: the caller passes short hashes
/// (computed by the identity layer), so this module does not depend on it and nothing
/// readable about the household leaks onto the network through TXT records.
package struct ServiceDescription: Sendable, Hashable {
    /// The DNS-SD service type every Hearth peer publishes and browses.
    package static let serviceType = "_hearth._tcp"

    /// Longest DNS label: an instance name is cut to this many bytes of UTF-8.
    package static let maximumInstanceNameBytes = 63

    /// The human-readable instance name, usually the device name ("Kitchen laptop").
    /// Avahi may publish it under an alternative ("Kitchen laptop #2") after a collision.
    package var instanceName: String
    /// The TCP port of this device's sync listener.
    package var port: UInt16
    /// The sync protocol version this device speaks (TXT key `v`).
    package var protocolVersion: Int
    /// Short lowercase hex hash of the account (household) ID (TXT key `a`).
    package var accountHash: String
    /// Short lowercase hex hash of the store identifier (TXT key `s`), for a service of one
    /// store (protocol 2 and earlier); `nil` for a device's service carrying every store
    /// (protocol 3), whose TXT has no `s`.
    package var storeHash: String?
    /// Short lowercase hex hash of this device's ID (TXT key `d`).
    package var deviceHash: String

    /// Describes the service to publish.
    ///
    /// - Parameters:
    ///   - instanceName: the device name; cut to 63 bytes of UTF-8 on a character boundary.
    ///   - port: the sync listener's TCP port.
    ///   - protocolVersion: the sync protocol version (1...9999).
    ///   - accountHash: lowercase hex, 8 to 64 characters (Hearth uses 16).
    ///   - storeHash: lowercase hex, 8 to 64 characters, or `nil` for a service of the device.
    ///   - deviceHash: lowercase hex, 8 to 64 characters.
    package init(
        instanceName: String, port: UInt16, protocolVersion: Int,
        accountHash: String, storeHash: String? = nil, deviceHash: String
    ) {
        self.instanceName = Self.truncatedInstanceName(instanceName)
        self.port = port
        self.protocolVersion = protocolVersion
        self.accountHash = accountHash
        self.storeHash = storeHash
        self.deviceHash = deviceHash
    }

    /// The record peers will parse out of our TXT, for comparisons.
    package var record: ServiceRecord {
        ServiceRecord(protocolVersion: protocolVersion, accountHash: accountHash,
                      storeHash: storeHash, deviceHash: deviceHash)
    }

    /// The TXT strings to publish, `key=value`, in a fixed order.
    package var txtStrings: [String] {
        ["\(ServiceRecord.Key.version)=\(protocolVersion)",
         "\(ServiceRecord.Key.account)=\(accountHash)"]
            + (storeHash.map { ["\(ServiceRecord.Key.store)=\($0)"] } ?? [])
            + ["\(ServiceRecord.Key.device)=\(deviceHash)"]
    }

    /// Checks what a peer would check, so we never publish something peers reject.
    ///
    /// - Throws: ``DiscoveryError/invalidServiceDescription(_:)``.
    package func validate() throws(DiscoveryError) {
        if instanceName.isEmpty { throw .invalidServiceDescription("instance name is empty") }
        if port == 0 { throw .invalidServiceDescription("port 0 cannot be connected to") }
        let entries = txtStrings.map { Array($0.utf8) }
        if case .failure(let rejection) = ServiceRecord.parse(txt: entries) {
            throw .invalidServiceDescription(rejection.description)
        }
    }

    /// Cuts a name to a DNS label's 63 bytes without splitting a character.
    static func truncatedInstanceName(_ name: String) -> String {
        if name.utf8.count <= maximumInstanceNameBytes { return name }
        var result = ""
        for character in name {
            if result.utf8.count + String(character).utf8.count > maximumInstanceNameBytes { break }
            result.append(character)
        }
        return result
    }
}
