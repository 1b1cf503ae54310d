import Foundation
import HearthCore
import HearthIdentity

/// A peer device refused an entry this device sent it (it told us, in a `refused` message).
///
/// The rest of what was sent was applied and the link stays up. The most common cause is a
/// clock: a device whose clock is hours ahead stamps its writes in the future, and peers
/// refuse entries more than ``HybridLogicalClock/maximumDrift`` ahead of their own clock.
/// Such entries are written again with the right time once the clock is fixed (see
/// `Replica.restampFutureEntries(wall:)`).
public struct SyncRefusal: Sendable, Hashable, CustomStringConvertible {
    /// The device that refused: its device ID, hex (`hearth device list` shows it).
    public var device: String
    /// What it refused, and why.
    public var entry: RefusedEntry
    /// The refusing device's clock at the time, in milliseconds since 1970.
    public var peerClock: UInt64
    /// This device's clock at the time, in milliseconds since 1970.
    public var localClock: UInt64

    /// When the refused entry was stamped ahead of this device's clock because the value it
    /// replaced was (a write is stamped after the value it replaces): the device that stamped
    /// that value (its device ID, hex; empty if unknown).
    public var replacedSigner: String?
    /// How far ahead of this device's clock that value was stamped, in milliseconds.
    public var replacedLead: UInt64?

    /// Whether the refused entry was another device's, which this device relayed.
    public var relayed = false

    package init(device: DeviceID, entry: RefusedEntry, peerClock: UInt64, localClock: UInt64,
                 imposedLead: Replica.ImposedLead? = nil, relayed: Bool = false) {
        self.relayed = relayed
        self.device = device.hex
        self.entry = entry
        self.peerClock = peerClock
        self.localClock = localClock
        if let imposedLead {
            replacedSigner = imposedLead.signer.map { Hex.encode($0) } ?? ""
            replacedLead = imposedLead.lead
        }
    }

    /// How far this device's clock was ahead of the peer's, in milliseconds (negative: behind).
    public var clockOffset: Int64 { Int64(clamping: localClock) &- Int64(clamping: peerClock) }

    /// The refusal for a log line, with advice when the cause is this device's clock.
    public var description: String {
        var text = "device \(device.prefix(8)) refused \(entry)"
        if entry.reason == .clockAhead, let lead = replacedLead, let signer = replacedSigner {
            // Not this device's clock: the value the write replaced was stamped ahead, and a
            // write is stamped after the value it replaces, so it wins wherever it is taken.
            let by = signer.isEmpty ? "another device" : "device \(signer.prefix(8))"
            text += "; the value it replaces was stamped " + String(format: "%.1f", Double(lead) / 3_600_000) + " h ahead of this device's clock by \(by)"
            text += ", and this write is stamped after it; peers whose clocks are behind refuse both until their clocks catch up"
            text += " (this device's own clock is " + String(format: "%.1f", abs(Double(clockOffset) / 3_600_000)) + " h \(clockOffset >= 0 ? "ahead" : "behind") of the refusing device's)"
        } else if entry.reason == .clockAhead, relayed {
            text += "; device \(entry.origin?.description ?? "?") wrote it, and this device relayed it: the writer's clock (or its stamp) is ahead, not this device's"
        } else if entry.reason == .clockAhead {
            let hours = Double(clockOffset) / 3_600_000
            text += String(format: "; this device's clock is %.1f h %@ of its clock", abs(hours), hours >= 0 ? "ahead" : "behind")
            if clockOffset > 0 { text += " (fix the clock: such entries are written again with the right time once it is)" }
        }
        return text
    }
}
