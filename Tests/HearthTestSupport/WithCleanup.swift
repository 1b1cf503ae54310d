/// Runs `body` with a ``Cleanup`` to register async cleanup on, as one would with `defer`, and
/// awaits every registered block (the last registered first) when `body` returns or throws.
///
/// `defer { Task { await engine.stop() } }` does not wait: the test ends, and the next one
/// starts, while the engine, listener or store is still stopping (or has not begun to).
///
/// ```swift
/// try await withCleanup { cleanup in
///     let engine = try await startEngine()
///     cleanup { await engine.stop() }
///     try await exercise(engine)
/// }
/// ```
package func withCleanup<Result>(isolation: isolated (any Actor)? = #isolation,
                                 _ body: (Cleanup) async throws -> Result) async rethrows -> Result {
    let cleanup = Cleanup()
    let result: Result
    do {
        result = try await body(cleanup)
    } catch {
        await cleanup.run()
        throw error
    }
    await cleanup.run()
    return result
}

/// The async cleanup of a ``withCleanup(isolation:_:)`` scope.
package final class Cleanup {
    private var blocks: [() async -> Void] = []

    fileprivate init() {}

    /// Registers `block` to be awaited when the scope ends, before the blocks registered earlier.
    package func callAsFunction(_ block: @escaping () async -> Void) {
        blocks.append(block)
    }

    fileprivate func run() async {
        while let block = blocks.popLast() { await block() }
    }
}
