import Foundation
import HearthCore
import HearthTransport

/// What a sync engine takes from the world, injected so that a test (or a simulated household)
/// can run many engines in one process, on its own clock and network, the same way every run:
/// the clocks, the source of randomness, and the network its links come from.
///
/// ```swift
/// let network = InMemoryNetwork()          // HearthTesting
/// var environment = SyncEnvironment()
/// environment.network = network.maker
/// environment.clock.wallMilliseconds = { virtualTime.milliseconds }
/// let engine = try SyncEngine(identity: identity, environment: environment, logger: logger)
/// ```
///
/// Protocol code reads no clock and draws no random number but through this.
package struct SyncEnvironment: Sendable {
    package var clock: SyncClock
    package var random: SyncRandom
    /// Makes the engine's network (TLS over TCP by default: ``PeerTransport``).
    package var network: @Sendable (PeerNetworkSetup) throws -> any PeerNetwork
    /// Handed each engine's ``SyncEngine/changes`` as the engine is made: how a test's network
    /// (HearthTesting's `InMemoryNetwork`) waits on the events of engines it did not make
    /// itself (those of stores), instead of polling them.
    package var observeChanges: (@Sendable (ChangeSignal) -> Void)?

    package init(clock: SyncClock = .system, random: SyncRandom = .system,
                 network: @escaping @Sendable (PeerNetworkSetup) throws -> any PeerNetwork = PeerTransport.network) {
        self.clock = clock
        self.random = random
        self.network = network
    }

    /// The system's clocks, random numbers and TLS over TCP.
    package static var system: SyncEnvironment { SyncEnvironment() }
}

/// The engine's clocks: wall time (stamps, certificate dates, figures) and monotonic time
/// (heartbeats, timeouts, back-off), with the way to wait on the latter.
package struct SyncClock: Sendable {
    /// Milliseconds since 1970.
    package var wallMilliseconds: @Sendable () -> UInt64
    /// Monotonic time, for intervals.
    package var now: @Sendable () -> ContinuousClock.Instant
    /// Waits `duration` of monotonic time (throws when the task is cancelled).
    package var sleep: @Sendable (Duration) async throws -> Void

    package init(wallMilliseconds: @escaping @Sendable () -> UInt64, now: @escaping @Sendable () -> ContinuousClock.Instant,
                 sleep: @escaping @Sendable (Duration) async throws -> Void) {
        self.wallMilliseconds = wallMilliseconds
        self.now = now
        self.sleep = sleep
    }

    package static let system = SyncClock(wallMilliseconds: { HybridLogicalClock.wallMilliseconds() }, now: { .now },
                                          sleep: { try await Task.sleep(for: $0) })

    /// The wall clock as a `Date`.
    package var date: Date { Date(timeIntervalSince1970: Double(wallMilliseconds()) / 1000) }
}

/// The engine's source of randomness (reconnect jitter).
package struct SyncRandom: Sendable {
    /// A number in `0..<1`.
    package var unit: @Sendable () -> Double

    package init(unit: @escaping @Sendable () -> Double) { self.unit = unit }

    package static let system = SyncRandom(unit: { Double.random(in: 0..<1) })

    /// A number in `range`.
    package func number(in range: ClosedRange<Double>) -> Double {
        range.lowerBound + (range.upperBound - range.lowerBound) * unit()
    }

    /// Draws from `generator` (a seeded one in tests), behind a lock.
    package static func seeded(_ generator: some RandomNumberGenerator & Sendable) -> SyncRandom {
        let locked = Locked(generator)
        return SyncRandom(unit: { locked.withLock { Double.random(in: 0..<1, using: &$0) } })
    }
}
