import HearthCore
import HearthIdentity
import Logging

/// What an engine and its sessions share, made once with the engine: who we are (as the
/// engine started; renewals are in ``SyncEngine/currentIdentity``), how we run, where we
/// log, what we count. Sessions reach the engine itself through a weak reference of their own.
final class EngineContext: Sendable {
    let identity: DeviceIdentity
    let options: SyncEngine.Options
    let logger: Logger
    let metrics: SyncMetrics
    /// For what a peer can make every connection say in a loop: once per peer and kind a minute.
    let limitedLog = LimitedLog()
    /// The clocks and randomness protocol code uses (``SyncEnvironment``): never the system's directly.
    let clock: SyncClock
    let random: SyncRandom

    init(identity: DeviceIdentity, options: SyncEngine.Options, logger: Logger, metrics: SyncMetrics, clock: SyncClock, random: SyncRandom) {
        self.clock = clock
        self.random = random
        self.identity = identity
        self.options = options
        self.logger = logger
        self.metrics = metrics
    }
}
