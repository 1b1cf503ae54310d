import Foundation
import Hearth
import HearthCore
import HearthIdentity
import Logging

/// Where this device's accounts and store data live, how the library logs, where the control
/// sockets go and how wrong the clock is: what every `hearth` command and the daemon work with.
/// The command resolves its options and the environment into one of these (`--config-dir`,
/// `$HEARTH_CONFIG_DIR`, `$TMPDIR`, …); a test builds one with its own temporary folders. The
/// library reads none of these from the environment itself.
package struct DeviceFolders: Sendable {
    package var accountDirectory: URL
    package var storeDataDirectory: String
    /// The library's log level; nil: each caller's default (``logger(defaultLevel:)``).
    package var logLevel: Logger.Level?
    /// The scrypt cost of the CA keys sealed here (``ScryptParameters/testing`` in tests only).
    package var caKeyScrypt: ScryptParameters
    /// The folder under which the store holders' control sockets live, in `hearth-<uid>/`
    /// (``ControlSocket/path(for:under:)``): the command's `$TMPDIR`, else `/tmp`.
    package var controlSocketBase: String
    /// How far this device's clock is off, for tests of a device whose clock is wrong: the
    /// command's `$HEARTH_TEST_CLOCK_SKEW_SECONDS` (docs/command.md), else none.
    package var clockSkew: Duration

    package init(accountDirectory: URL, storeDataDirectory: String, logLevel: Logger.Level? = nil,
                 caKeyScrypt: ScryptParameters = .standard, controlSocketBase: String = "/tmp", clockSkew: Duration = .zero) {
        self.accountDirectory = accountDirectory
        self.storeDataDirectory = storeDataDirectory
        self.logLevel = logLevel
        self.caKeyScrypt = caKeyScrypt
        self.controlSocketBase = controlSocketBase
        self.clockSkew = clockSkew
    }

    package var accounts: AccountStore { AccountStore(directory: accountDirectory, logger: logger, scrypt: caKeyScrypt) }

    package var logger: Logger { logger(defaultLevel: .error) }

    /// The library's logger at ``logLevel``, else `defaultLevel` (a long-running `serve`,
    /// `watch` or daemon shows warnings, such as a peer refusing this device's writes).
    package func logger(defaultLevel: Logger.Level) -> Logger {
        var logger = Logger(label: "hearth")
        logger.logLevel = logLevel ?? defaultLevel
        return logger
    }

    /// The signed-in device identity, or nil when signed out.
    package func currentIdentity() throws(CommandError) -> DeviceIdentity? {
        do {
            return try accounts.loadCurrentIdentity()
        } catch {
            throw CommandError(.general, "cannot read the account in \(accountDirectory.path): \(error)")
        }
    }
}

/// How a device finds and accepts peers (the command's `--peer`, `--port`, `--listen`,
/// `--renewal-window`), for one store or for every store the daemon holds.
package struct PeerSettings: Sendable {
    /// Static peers (`host:port`); empty: discovery (Avahi, falling back to `$HEARTH_PEERS`).
    package var peers: [String]
    package var listenHost: String
    /// The TCP port to listen on; nil: any free port.
    package var port: Int?
    package var renewalWindowDays: Int

    package init(peers: [String] = [], listenHost: String = "0.0.0.0", port: Int? = nil, renewalWindowDays: Int = 90) {
        self.peers = peers
        self.listenHost = listenHost
        self.port = port
        self.renewalWindowDays = renewalWindowDays
    }

    /// The sync settings a store opens with.
    ///
    /// One-shot commands and `serve`/`watch` ping idle links every 2 s (a dead peer is seen in
    /// 8 s, and `--wait` stays short); the daemon, always on, keeps the library's sparse
    /// default (a ping after 30 idle seconds, 90 s to call a silent link dead, TCP keepalive).
    package func syncSettings(_ folders: DeviceFolders, sparseHeartbeats: Bool = false) -> SyncSettings {
        let defaults = SyncSettings()
        var settings = SyncSettings(accountDirectory: folders.accountDirectory.path,
                                    discovery: peers.isEmpty ? .automatic : .staticPeers(peers),
                                    listenHost: listenHost, port: port ?? 0,
                                    heartbeatInterval: sparseHeartbeats ? defaults.heartbeatInterval : .seconds(2),
                                    timeout: sparseHeartbeats ? defaults.timeout : .seconds(8))
        settings.renewalWindow = .seconds(renewalWindowDays * 86_400)
        return settings
    }

    /// How peers are found, for people.
    package var discoveryDescription: String {
        peers.isEmpty ? "automatic (Avahi mDNS; $HEARTH_PEERS or the peers file where no daemon runs)"
            : "static: " + peers.joined(separator: ", ")
    }
}
