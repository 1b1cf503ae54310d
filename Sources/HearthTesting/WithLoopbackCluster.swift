import Logging

/// Runs `body` with a ``LoopbackCluster`` and shuts the cluster down when `body` returns or
/// throws, so no test leaves replicas running or a temporary folder behind.
///
/// ```swift
/// @Test func colourReachesEveryDevice() async throws {
///     try await withLoopbackCluster(replicas: 3, storeIdentifier: "com.example.colors") { cluster in
///         cluster[0].set(2, forKey: "backgroundColor")
///         try await cluster.waitUntilConverged(expected: ["backgroundColor": 2])
///     }
/// }
/// ```
///
/// The parameters are ``LoopbackCluster/init(replicas:storeIdentifier:topology:heartbeat:linkTimeout:writeBehindDelay:connectTimeout:clockSkews:logger:)``'s.
public func withLoopbackCluster<Result: Sendable>(
    replicas: Int = 3, storeIdentifier: String = "com.example.app", topology: LoopbackCluster.Topology = .mesh,
    heartbeat: Duration = .milliseconds(300), linkTimeout: Duration? = nil, writeBehindDelay: Duration = .milliseconds(100),
    connectTimeout: Duration = .seconds(15), clockSkews: [Duration]? = nil, logger: Logger? = nil,
    _ body: (LoopbackCluster) async throws -> Result
) async throws -> Result {
    try await withLoopbackCluster(network: nil, replicas: replicas, storeIdentifier: storeIdentifier, topology: topology, heartbeat: heartbeat,
                                  linkTimeout: linkTimeout, writeBehindDelay: writeBehindDelay, connectTimeout: connectTimeout,
                                  clockSkews: clockSkews, logger: logger, body)
}

/// ``withLoopbackCluster(replicas:storeIdentifier:topology:heartbeat:linkTimeout:writeBehindDelay:connectTimeout:clockSkews:logger:_:)``
/// on `network` (an ``InMemoryNetwork``: no sockets, no TLS) when it is given.
package func withLoopbackCluster<Result: Sendable>(
    network: InMemoryNetwork?, replicas: Int = 3, storeIdentifier: String = "com.example.app", topology: LoopbackCluster.Topology = .mesh,
    heartbeat: Duration = .milliseconds(300), linkTimeout: Duration? = nil, writeBehindDelay: Duration = .milliseconds(100),
    connectTimeout: Duration = .seconds(15), clockSkews: [Duration]? = nil, logger: Logger? = nil,
    _ body: (LoopbackCluster) async throws -> Result
) async throws -> Result {
    let cluster = try await LoopbackCluster(network: network, replicas: replicas, storeIdentifier: storeIdentifier, topology: topology, heartbeat: heartbeat,
                                            linkTimeout: linkTimeout, writeBehindDelay: writeBehindDelay, connectTimeout: connectTimeout,
                                            clockSkews: clockSkews, logger: logger)
    do {
        let result = try await body(cluster)
        await cluster.shutdown()
        return result
    } catch {
        await cluster.shutdown()
        throw error
    }
}
