import Testing

/// Polls `condition` every 10 ms until it holds or `timeout` passes; returns whether it held.
///
/// With `what`, a timeout also records a test issue naming it (at the caller's line), so a
/// test that needs the condition to go on can simply wait; without, the caller decides:
///
/// ```swift
/// try await eventually(timeout: .seconds(15), "B to receive A's write") { b.string(forKey: "k") == "v" }
/// #expect(await eventually { watcher.isRunning })
/// ```
///
/// For what has no event to wait on: processes, Avahi, files, TLS stores. Tests on the
/// in-memory network wait with `InMemoryNetwork.until`/`LoopbackCluster.until` and engines with
/// `SyncEngine.until` (HearthTesting), which re-check on each signalled change, never on a timer.
@discardableResult
package func eventually(timeout: Duration = .seconds(30), _ what: String? = nil,
                        sourceLocation: SourceLocation = #_sourceLocation,
                        _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    // The deadline may pass while we sleep: look once more.
    if try await condition() { return true }
    if let what { Issue.record("timed out after \(timeout) waiting for \(what)", sourceLocation: sourceLocation) }
    return false
}
