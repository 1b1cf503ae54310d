import Foundation
import HearthCore

/// That a device of the account told this device it was removed from it, by sending the
/// CA-signed record. (A bare refusal of our certificate as revoked in a TLS handshake is not
/// one: any member could send it. Older builds kept such notices without a record; they are
/// read but say nothing, see ``DeviceRemovals/notice``.)
package struct RemovalNotice: Sendable, Hashable, CustomStringConvertible {
    /// The device that said so.
    package let peer: DeviceID
    /// Its name, from its certificate.
    package let peerName: String
    package let date: Date
    /// The CA-signed record, when a peer sent it; nil when a peer only refused our certificate.
    package let record: DeviceRemoval?

    package init(peer: DeviceID, peerName: String, date: Date, record: DeviceRemoval?) {
        self.peer = peer
        self.peerName = peerName
        self.date = date
        self.record = record
    }

    package var description: String {
        let how = record.map { "signed removal of \($0.date)" } ?? "its certificate refused as revoked"
        return "this device was removed from the account (\(how), told by \(peerName) (\(peer.short)) at \(date))"
    }

    var propertyList: PropertyListValue {
        var fields: [String: PropertyListValue] = [
            "peer": .data(peer.data), "name": .string(peerName), "at": .integer(Int64(date.timeIntervalSince1970 * 1000)),
        ]
        if let record { fields["record"] = record.propertyList }
        return .dictionary(fields)
    }

    init?(propertyList value: PropertyListValue?) {
        guard let fields = value?.dictionaryValue, let peerBytes = fields["peer"]?.dataValue, let peer = DeviceID(bytes: peerBytes),
              let name = fields["name"]?.stringValue, let at = fields["at"]?.integerValue else { return nil }
        self.init(peer: peer, peerName: name, date: Date(timeIntervalSince1970: Double(at) / 1000),
                  record: fields["record"].flatMap(DeviceRemoval.init(propertyList:)))
    }
}
