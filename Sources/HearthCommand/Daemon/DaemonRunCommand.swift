import ArgumentParser
import Foundation

/// `hearth daemon run` (also plain `hearth daemon`): the daemon in the foreground, logging to
/// stderr, until SIGINT or SIGTERM.
struct DaemonRunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the device daemon in the foreground until SIGINT or SIGTERM (what the systemd unit runs).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: PeerOptions
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
        let daemon = DeviceDaemon(global: global, options: store.storeOptions, rescanInterval: .milliseconds(Int(rescanInterval * 1000)))
        let control = ControlServer(path: DaemonControl.path(in: directory))
        control?.start { line in await DaemonControl.answer(line, daemon: daemon) }
        if control == nil { note("daemon: no control socket in \(directory); hearth daemon status will not reach it") }
        let identity = try? global.currentIdentity()
        let whose: String = identity.map { "device \($0.deviceName) (\($0.deviceID.short)) in \($0.account.displayName) (\($0.account.id.short))" }
            ?? "this device (signed out)"
        note("daemon \(getpid()): holding the stores of \(whose) under \(global.storeDataDirectory); peers: \(store.storeOptions.discoveryDescription). Ctrl-C to stop.")
        let running = Task { await daemon.run() }
        let reason = await signals.wait()
        if reason != .outputClosed { note("daemon: \(StoreSession.describe(reason)); saving and closing every store") }
        control?.stop()
        await daemon.stop()
        running.cancel()
    }
}
