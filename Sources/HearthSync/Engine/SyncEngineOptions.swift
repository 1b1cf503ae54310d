/// How a ``SyncEngine`` listens, beats and backs off (`SyncEngine.Options`).
package struct SyncEngineOptions: Sendable {
    /// Where to listen (default: every interface, a free port).
    package var host: String
    package var port: Int
    /// How long a link may be idle before it is pinged, and how long a silent link lives
    /// (a dead peer is noticed within `timeout` plus a third of it).
    package var heartbeatInterval: Duration
    package var timeout: Duration
    /// Reconnect back-off bounds (each wait is jittered by ±50 %).
    package var minimumBackoff: Duration
    package var maximumBackoff: Duration
    /// How long before its certificate expires a device asks its peers for a renewed one
    /// (any peer holding the unlocked account CA answers; see ``SyncEngine/authority``).
    package var renewalWindow: Duration

    package init(host: String = "0.0.0.0", port: Int = 0, heartbeatInterval: Duration = .seconds(30),
                timeout: Duration = .seconds(90), minimumBackoff: Duration = .milliseconds(200),
                maximumBackoff: Duration = .seconds(10), renewalWindow: Duration = .seconds(90 * 86_400)) {
        self.renewalWindow = renewalWindow
        self.host = host
        self.port = port
        self.heartbeatInterval = heartbeatInterval
        self.timeout = timeout
        self.minimumBackoff = minimumBackoff
        self.maximumBackoff = maximumBackoff
    }
}
