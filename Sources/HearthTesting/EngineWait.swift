import HearthCore
import HearthSync

extension SyncEngine {
    /// Waits until `condition` holds, checking it now and again each time one of `engines`
    /// signals a change (``SyncEngine/changes``: a session comes or goes, a message handled, a
    /// stop), on any network, TLS included; throws, naming `what`, if it does not hold by
    /// `deadline`, a bound for a failure that no test relies on.
    ///
    /// ```swift
    /// engineB.addPeer(host: "127.0.0.1", port: portA)
    /// try await SyncEngine.until("A and B connected", engines: [engineA, engineB]) {
    ///     engineA.connectedPeers.count == 1 && engineB.connectedPeers.count == 1
    /// }
    /// ```
    package static func until(_ what: @autoclosure () -> String, engines: [SyncEngine], deadline: Duration = .seconds(30),
                              _ condition: () -> Bool) async throws {
        guard await InMemoryNetwork.wait(for: deadline, observing: { engines.map(\.changes) }, condition) else {
            throw InMemoryNetworkError("timed out after \(deadline) waiting for \(what())")
        }
    }

    /// ``until(_:engines:deadline:_:)`` on this engine's changes alone.
    package func until(_ what: @autoclosure () -> String, deadline: Duration = .seconds(30), _ condition: () -> Bool) async throws {
        try await Self.until(what(), engines: [self], deadline: deadline, condition)
    }
}
