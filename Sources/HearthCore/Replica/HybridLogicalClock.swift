import Foundation

/// A hybrid-logical-clock timestamp: wall-clock milliseconds since 1970 in the high
/// 48 bits, a logical counter in the low 16.
///
/// Comparing the raw values orders events so that a write a replica makes of a key after it
/// has seen a timestamp of that key is later than that timestamp, whatever the wall clocks say.
package struct HLCTimestamp: Hashable, Comparable, Sendable {
    package let rawValue: UInt64

    package init(rawValue: UInt64) { self.rawValue = rawValue }

    package init(milliseconds: UInt64, counter: UInt16) {
        rawValue = (milliseconds << 16) | UInt64(counter)
    }

    package var milliseconds: UInt64 { rawValue >> 16 }
    package var counter: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    package static let zero = HLCTimestamp(rawValue: 0)

    package static func < (a: HLCTimestamp, b: HLCTimestamp) -> Bool { a.rawValue < b.rawValue }

    /// The wall-clock part as a `Date`.
    package var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
}

extension HLCTimestamp: CustomStringConvertible {
    package var description: String { "\(milliseconds).\(counter)" }
}

/// A hybrid logical clock (Kulkarni et al., 2014).
///
/// `tick` stamps a local write; `observe` folds in a timestamp seen from a peer. The
/// clock never runs backwards, and after `observe(t)` every `tick` is later than `t`, for
/// any `t` up to ``maximumLead`` ahead of the wall clock.
///
/// A remote timestamp more than ``maximumDrift`` ahead of the local wall clock is not
/// trusted: `observe` refuses it, so one device with a wrong clock cannot drag every
/// other device's clock (and every later write) into the future.
///
/// One that is accepted moves this clock at most ``maximumLead`` ahead of the local wall
/// clock. Otherwise one device (a wrong clock, or a compromised member) stamping entries
/// just under the drift bound would drag this device's clock, and so all its later writes,
/// that far ahead, where every peer whose clock is a little behind refuses them. What
/// last-writer-wins needs of the clock, that a write made after seeing a value beats that
/// value, holds per key: ``Replica/write(_:forKey:wall:size:)`` stamps a write after the
/// entry it replaces, however far ahead that one is.
package struct HybridLogicalClock: Sendable, Equatable {
    /// How far ahead of the local wall clock a remote timestamp may be (12 hours).
    package static let maximumDrift: UInt64 = 12 * 3_600_000

    /// How far ahead of the local wall clock a remote timestamp may move this clock (1 minute):
    /// far more than honest clocks kept by NTP differ, far less than ``maximumDrift``, so
    /// this device's writes stay acceptable to every peer whose clock is less than
    /// `maximumDrift - maximumLead` behind, whatever its peers stamp.
    package static let maximumLead: UInt64 = 60_000

    package private(set) var last: HLCTimestamp

    package init(last: HLCTimestamp = .zero) { self.last = last }

    /// The local wall clock in milliseconds since 1970.
    package static func wallMilliseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(max(0, ts.tv_sec)) * 1000 + UInt64(max(0, ts.tv_nsec)) / 1_000_000
    }

    /// A timestamp for a local event, later than every timestamp this clock has produced or seen.
    package mutating func tick(wall: UInt64) -> HLCTimestamp {
        if wall > last.milliseconds {
            last = HLCTimestamp(milliseconds: wall, counter: 0)
        } else {
            last = Self.successor(of: last)
        }
        return last
    }

    /// Whether a remote timestamp is within ``maximumDrift`` of `wall`.
    package static func isAcceptable(_ remote: HLCTimestamp, wall: UInt64) -> Bool {
        remote.milliseconds <= wall &+ maximumDrift
    }

    /// Folds in a timestamp seen from a peer, up to ``maximumLead`` ahead of `wall`. Returns
    /// `false`, and changes nothing, for a timestamp beyond ``maximumDrift`` into the future.
    @discardableResult
    package mutating func observe(_ remote: HLCTimestamp, wall: UInt64) -> Bool {
        guard Self.isAcceptable(remote, wall: wall) else { return false }
        let bounded = min(remote, HLCTimestamp(milliseconds: wall &+ Self.maximumLead, counter: 0))
        if bounded > last { last = bounded }
        return true
    }

    /// The next timestamp after `t`: the counter, and when it overflows, the millisecond.
    package static func successor(of t: HLCTimestamp) -> HLCTimestamp {
        HLCTimestamp(rawValue: t.rawValue &+ 1)
    }
}
