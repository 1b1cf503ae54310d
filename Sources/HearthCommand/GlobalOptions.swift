import ArgumentParser
import Foundation
import Hearth
import HearthCore
import HearthDaemon
import HearthIdentity
import Logging

/// Where this device's accounts and data live; every subcommand takes these.
struct GlobalOptions: ParsableArguments {
    @Option(name: .customLong("config-dir"), help: ArgumentHelp(
        "The account directory (default $HEARTH_CONFIG_DIR, else $XDG_CONFIG_HOME/hearth).", valueName: "dir"))
    var configDirectory: String?

    @Option(name: .customLong("data-dir"), help: ArgumentHelp(
        "The store data directory (default $HEARTH_DATA_DIR, else $XDG_DATA_HOME/hearth).", valueName: "dir"))
    var dataDirectory: String?

    @Option(name: .customLong("log-level"), help: ArgumentHelp(
        "Library log level on stderr: trace, debug, info, notice, warning, error (default error, warning for serve and watch; or $HEARTH_LOG_LEVEL).",
        valueName: "level"))
    var logLevel: String?

    private var environment: [String: String] { ProcessInfo.processInfo.environment }

    var accountDirectory: URL {
        if let configDirectory { return URL(fileURLWithPath: configDirectory) }
        if let dir = environment["HEARTH_CONFIG_DIR"], !dir.isEmpty { return URL(fileURLWithPath: dir) }
        return AccountStore.defaultDirectory()
    }

    var storeDataDirectory: String {
        if let dataDirectory { return dataDirectory }
        if let dir = environment["HEARTH_DATA_DIR"], !dir.isEmpty { return dir }
        return StoreLocation.defaultDataDirectory()
    }

    var accounts: AccountStore { folders.accounts }

    /// The scrypt cost of the CA keys the command seals (`account create`, `protect`, joining
    /// with an old cheap bundle): Hearth's standard, or N = 2^10 under
    /// `HEARTH_TEST_WEAK_SCRYPT=1`, for the tests that spawn this command by the hundred
    /// (docs/security.md: never for a real account). What is read is bounded the same either way.
    var caKeyScrypt: ScryptParameters { environment["HEARTH_TEST_WEAK_SCRYPT"] == "1" ? .testing : .standard }

    /// These options and the environment resolved: what the daemon library works with, which
    /// reads no environment variable of its own. The log level is `--log-level`, else
    /// `$HEARTH_LOG_LEVEL`, else each caller's default (a long-running `serve` or `watch` shows
    /// warnings, such as a peer refusing this device's writes); the control sockets go under
    /// `$TMPDIR`, else `/tmp`; `$HEARTH_TEST_CLOCK_SKEW_SECONDS` shifts the clock of the stores
    /// the command opens (tests of a device whose clock is wrong, docs/command.md).
    var folders: DeviceFolders {
        DeviceFolders(accountDirectory: accountDirectory, storeDataDirectory: storeDataDirectory,
                      logLevel: (logLevel ?? environment["HEARTH_LOG_LEVEL"]).flatMap(Logger.Level.init(rawValue:)),
                      caKeyScrypt: caKeyScrypt,
                      controlSocketBase: environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp",
                      clockSkew: .seconds(environment["HEARTH_TEST_CLOCK_SKEW_SECONDS"].flatMap(Int64.init) ?? 0))
    }

    var logger: Logger { folders.logger }

    func logger(defaultLevel: Logger.Level) -> Logger { folders.logger(defaultLevel: defaultLevel) }

    /// The signed-in device identity, or nil when signed out.
    func currentIdentity() throws -> DeviceIdentity? { try folders.currentIdentity() }
}

/// How a device finds and accepts peers: every store command takes these, and so does the
/// daemon (which holds every store, so takes no `--store`).
struct PeerOptions: ParsableArguments {
    @Option(name: .customLong("peer"), help: ArgumentHelp(
        "Sync with this peer (repeatable); replaces discovery (default: Avahi, falling back to $HEARTH_PEERS).",
        valueName: "host:port"))
    var peers: [String] = []

    @Option(name: .customLong("port"), help: ArgumentHelp("The TCP port to listen on for peers (default: any free port).",
                                                          valueName: "port"))
    var port: Int?

    @Option(name: .customLong("listen"), help: ArgumentHelp("The address to listen on for peers.", valueName: "host"))
    var listenHost = "0.0.0.0"

    @Option(name: .customLong("renewal-window"), help: ArgumentHelp(
        "Ask peers for a renewed certificate once this device's expires within this many days, and (with the account CA unlocked) "
            + "renew peers' within as many (default: $HEARTH_RENEWAL_WINDOW_DAYS, else 90). More than the days left (certificates last "
            + "365) brings a device into its window now.", valueName: "days"))
    var renewalWindowDays: Int?

    /// The renewal window in days: the option, else `$HEARTH_RENEWAL_WINDOW_DAYS`, else 90.
    static func renewalWindowDays(_ option: Int?) -> Int {
        option ?? ProcessInfo.processInfo.environment["HEARTH_RENEWAL_WINDOW_DAYS"].flatMap { Int($0) }.flatMap { (1...3650).contains($0) ? $0 : nil } ?? 90
    }

    func validate() throws {
        if let renewalWindowDays, !(1...3650).contains(renewalWindowDays) { throw ValidationError("--renewal-window must be 1-3650 days") }
        for peer in peers where (try? StaticDiscoveryEndpoint.check(peer)) == nil {
            throw ValidationError("--peer \(peer) is not host:port")
        }
        if let port, !(0...65535).contains(port) { throw ValidationError("--port must be 0-65535") }
    }

    /// These options resolved (the renewal window from the environment if not given): what
    /// the daemon and a store open with.
    var settings: PeerSettings {
        PeerSettings(peers: peers, listenHost: listenHost, port: port, renewalWindowDays: Self.renewalWindowDays(renewalWindowDays))
    }
}

/// Which store a command works on, and how it finds peers.
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("store"), help: ArgumentHelp(
        "The store identifier, e.g. com.example.notes (default $HEARTH_STORE_IDENTIFIER).", valueName: "id"))
    var storeIdentifier: String?

    @OptionGroup var peering: PeerOptions
    var peers: [String] { peering.peers }
    var port: Int? { peering.port }
    var listenHost: String { peering.listenHost }

    /// The identifier, from the option or the environment.
    func identifier() throws -> String {
        if let storeIdentifier, !storeIdentifier.isEmpty { return storeIdentifier }
        if let id = ProcessInfo.processInfo.environment["HEARTH_STORE_IDENTIFIER"], !id.isEmpty { return id }
        throw CommandError(.usage, "no store given: pass --store ID (or set HEARTH_STORE_IDENTIFIER)")
    }

    var settings: PeerSettings { peering.settings }

    /// How peers are found, for people.
    var discoveryDescription: String { settings.discoveryDescription }
}

extension StoreAccess {
    /// The store these options name, for the signed-in account (or the signed-out replica).
    init(global: GlobalOptions, options: StoreOptions) throws {
        self.init(folders: global.folders, peering: options.settings, storeIdentifier: try options.identifier(),
                  identity: try global.currentIdentity())
    }
}

/// `host:port` syntax check without pulling discovery into the command.
enum StaticDiscoveryEndpoint {
    static func check(_ text: String) throws {
        guard let colon = text.lastIndex(of: ":"), colon != text.startIndex,
              let port = Int(text[text.index(after: colon)...]), (1...65535).contains(port) else {
            throw CommandError(.usage, "\(text) is not host:port")
        }
    }
}
