/// Orders the tests of all targets around the test network's one avahi-daemon: a test that
/// stops or restarts it takes it exclusively; a test that only uses it shares it. (Inside
/// one target `.serialized` does this; the targets run side by side in one process.)
///
/// ```swift
/// try await AvahiDaemonGate.sharing { … publish, browse … }
/// try await AvahiDaemonGate.exclusively { … avahi-restart.sh … }
/// ```
public actor AvahiDaemonGate {
    private static let gate = AvahiDaemonGate()

    private var users = 0
    private var restarting = false
    /// First come, first served, so a restart is not starved by a stream of users.
    private var waiting: [(exclusive: Bool, resume: CheckedContinuation<Void, Never>)] = []

    /// Runs `body` while no test restarts the daemon.
    public static func sharing<T>(_ body: () async throws -> T) async throws -> T {
        try await gate.run(exclusive: false, body)
    }

    /// Runs `body` while no other test uses the daemon.
    public static func exclusively<T>(_ body: () async throws -> T) async throws -> T {
        try await gate.run(exclusive: true, body)
    }

    private nonisolated func run<T>(exclusive: Bool, _ body: () async throws -> T) async throws -> T {
        await acquire(exclusive)
        do {
            let result = try await body()
            await release(exclusive)
            return result
        } catch {
            await release(exclusive)
            throw error
        }
    }

    private func canEnter(_ exclusive: Bool) -> Bool {
        exclusive ? !restarting && users == 0 : !restarting
    }

    private func enter(_ exclusive: Bool) {
        if exclusive { restarting = true } else { users += 1 }
    }

    private func acquire(_ exclusive: Bool) async {
        if waiting.isEmpty, canEnter(exclusive) {
            enter(exclusive)
            return
        }
        await withCheckedContinuation { waiting.append((exclusive, $0)) }
    }

    private func release(_ exclusive: Bool) {
        if exclusive { restarting = false } else { users -= 1 }
        while let next = waiting.first, canEnter(next.exclusive) {
            waiting.removeFirst()
            enter(next.exclusive)
            next.resume.resume()
        }
    }
}
