import ArgumentParser
import Foundation

/// `hearth daemon run` (also plain `hearth daemon`): the daemon in the foreground, logging to
/// stderr, until SIGINT or SIGTERM.
struct DaemonRunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the device daemon in the foreground until SIGINT or SIGTERM (what the systemd unit runs).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: DaemonStoreOptions
    @Option(name: .customLong("rescan-interval"), help: ArgumentHelp(
        "How often to look for stores that appeared in the data folder, in seconds (default 30).", valueName: "seconds"))
    var rescanInterval: Double = 30

    func validate() throws {
        guard rescanInterval >= 0.1, rescanInterval <= 86_400 else { throw ValidationError("--rescan-interval must be 0.1-86400 seconds") }
    }

    func run() async throws {
        let directory = try RuntimeDirectory.prepare()
        let lock = try DaemonLock.acquire(in: directory)
        defer { lock.release() }
        let signals = SignalWaiter()
        let daemon = DeviceDaemon(global: global, options: store.options, rescanInterval: .milliseconds(Int(rescanInterval * 1000)))
        let control = ControlServer(path: DaemonControl.path(in: directory))
        control?.start { line in await DaemonControl.answer(line, daemon: daemon) }
        if control == nil { note("daemon: no control socket in \(directory); hearth daemon status will not reach it") }
        let identity = try? global.currentIdentity()
        let whose: String = identity.map { "device \($0.deviceName) (\($0.deviceID.short)) in \($0.account.displayName) (\($0.account.id.short))" }
            ?? "this device (signed out)"
        note("daemon \(getpid()): holding the stores of \(whose) under \(global.storeDataDirectory); peers: \(store.options.discoveryDescription). Ctrl-C to stop.")
        let running = Task { await daemon.run() }
        let reason = await signals.wait()
        if reason != .outputClosed { note("daemon: \(StoreSession.describe(reason)); saving and closing every store") }
        control?.stop()
        await daemon.stop()
        running.cancel()
    }
}

/// The peer options of the daemon: those of a store, without `--store` (it holds them all).
struct DaemonStoreOptions: ParsableArguments {
    @Option(name: .customLong("peer"), help: ArgumentHelp(
        "Sync with this peer (repeatable); replaces discovery (default: Avahi, falling back to $HEARTH_PEERS).",
        valueName: "host:port"))
    var peers: [String] = []

    @Option(name: .customLong("port"), help: ArgumentHelp("The TCP port to listen on for peers (default: any free port).",
                                                          valueName: "port"))
    var port: Int?

    @Option(name: .customLong("listen"), help: ArgumentHelp("The address to listen on for peers.", valueName: "host"))
    var listenHost = "0.0.0.0"

    /// The same settings as a store's options (what every held store opens with).
    var options: StoreOptions {
        do {
            return try StoreOptions.parse(arguments)
        } catch {
            preconditionFailure("options checked by validate() do not parse: \(error)")
        }
    }

    func validate() throws { _ = try StoreOptions.parse(arguments) }

    /// Parsed rather than assigned: an argument parser's option cannot be set from code.
    private var arguments: [String] {
        ["--listen", listenHost] + peers.flatMap { ["--peer", $0] } + (port.map { ["--port", String($0)] } ?? [])
    }
}
