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

    package init(device: DeviceID, entry: RefusedEntry, peerClock: UInt64, localClock: UInt64) {
        self.device = device.hex
        self.entry = entry
        self.peerClock = peerClock
        self.localClock = localClock
    }

    /// How far this device's clock was ahead of the peer's, in milliseconds (negative: behind).
    public var clockOffset: Int64 { Int64(clamping: localClock) &- Int64(clamping: peerClock) }

    /// The refusal for a log line, with advice when the cause is this device's clock.
    public var description: String {
        var text = "device \(device.prefix(8)) refused \(entry)"
        if entry.reason == .clockAhead {
            let hours = Double(clockOffset) / 3_600_000
            text += String(format: "; this device's clock is %.1f h %@ of its clock", abs(hours), hours >= 0 ? "ahead" : "behind")
            if clockOffset > 0 { text += " (fix the clock: such entries are written again with the right time once it is)" }
        }
        return text
    }
}
