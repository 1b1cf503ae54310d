import HearthIdentity
import Logging

extension SyncEngine {
    /// What the sessions of an engine share: who we are, how we verify, what we count.
    final class Context: Sendable {
        let identity: DeviceIdentity
        let options: Options
        let logger: Logger
        let metrics: SyncMetrics
        weak let engine: SyncEngine?

        init(identity: DeviceIdentity, options: Options, logger: Logger, metrics: SyncMetrics, engine: SyncEngine) {
            self.identity = identity
            self.options = options
            self.logger = logger
            self.metrics = metrics
            self.engine = engine
        }
    }
}
