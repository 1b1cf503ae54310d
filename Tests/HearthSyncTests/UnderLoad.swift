import Hearth

/// The timeouts of this target's `LoopbackCluster`s. The suite runs 6 tests at a time on 2
/// cores, under ThreadSanitizer (3 at a time, several times slower), and in CI beside CPU hogs:
/// there a replica can be silent, or slow to connect, for seconds with nothing wrong.
enum UnderLoad {
    /// How long a silent link is kept: `SyncSettings`' default (90 s), as these tests had before
    /// they used LoopbackCluster. Its default, five 300 ms heartbeats, drops links under load,
    /// links the tests count on.
    static let linkTimeout = SyncSettings().timeout
    /// How long a cluster may take to connect every link and do its initial sync (the tests
    /// waited as long for their connections before).
    static let connectTimeout: Duration = .seconds(30)
}

extension UbiquitousKeyValueStore {
    /// How many heartbeat messages (pings and pongs) this store's sync engine has received: a
    /// test that shows something does NOT happen over a few heartbeats waits for these to go
    /// up (an event on the in-memory network), not for the time they usually take.
    var heartbeatsReceived: Int { messagesReceived("ping") + messagesReceived("pong") }

    /// How many messages of `kind` ("ping", "pong", "delta"…) this store's sync engine has received.
    func messagesReceived(_ kind: String) -> Int { syncMetrics?.receivedByType[kind]?.messages ?? 0 }
}
