/// What one ``AvahiSession`` publishes and which resolved services it reports: one DNS-SD
/// service type. The sync service (``ServiceDescription``, `_hearth._tcp`) and pairing requests
/// (``PairingAnnouncement``, `_hearth-pair._tcp`) share the Avahi code through it.
struct AvahiServiceSpec: Sendable {
    /// A service to publish.
    struct Publication: Sendable {
        var instanceName: String
        var port: UInt16
        var txt: [String]
    }

    /// What to make of a resolved instance, from its TXT strings.
    enum Verdict: Sendable {
        /// Report it, with its parsed Hearth fields where the type has them.
        case accept(ServiceRecord?)
        /// Our own service, seen from another interface: ignore quietly.
        case own
        /// Well formed, but not for us (another account or store): drop quietly.
        case foreign
        /// Refused, with why (logged as a warning: the record is malformed or hostile).
        case malformed(String)
    }

    var serviceType: String
    /// Nil: publish nothing (a member browsing pairing requests).
    var publication: Publication?
    /// False: browse nothing (a newcomer announcing its request).
    var browses: Bool
    var judge: @Sendable ([[UInt8]]) -> Verdict
}

extension ServiceDescription {
    /// The sync service: publish this device, browse the devices of the same account and store.
    var avahiSpec: AvahiServiceSpec {
        let own = self
        return AvahiServiceSpec(
            serviceType: Self.serviceType,
            publication: .init(instanceName: instanceName, port: port, txt: txtStrings),
            browses: true,
            judge: { entries in
                switch ServiceRecord.parse(txt: entries) {
                case .failure(let rejection):
                    return .malformed(rejection.description)
                case .success(let record):
                    if record.deviceHash == own.deviceHash { return .own }
                    // A device's service (no store hash) speaks to devices' services only; a store's
                    // service (an older build) to those of the same store.
                    if record.accountHash != own.accountHash || record.storeHash != own.storeHash { return .foreign }
                    return .accept(record)
                }
            })
    }
}
