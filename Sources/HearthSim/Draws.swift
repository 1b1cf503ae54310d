import HearthCore

/// The draws of a run's workload, faults and hostile member from the seed, in the order they
/// are made (the engines, the LAN and the replica IDs draw from their own streams).
///
/// One stream shared by the ``Household`` and its ``HouseholdFaults``, behind one lock: the order
/// of the draws is what makes a seed replay, so both take them from here.
final class Draws: Sendable {
    private let random: Locked<SplitMix64>

    init(seed: UInt64) {
        random = Locked(SplitMix64(seed: seed))
    }

    func draw() -> UInt64 { random.withLock { $0.next() } }
    func draw(below bound: Int) -> Int { Int(draw() % UInt64(bound)) }
    func unit() -> Double { Double(draw() >> 11) / Double(1 << 53) }

    /// A duration drawn uniformly from `range` (seconds), in whole milliseconds.
    func duration(_ range: ClosedRange<Double>) -> Duration {
        .milliseconds(Int64((range.lowerBound + (range.upperBound - range.lowerBound) * unit()) * 1000))
    }
}
