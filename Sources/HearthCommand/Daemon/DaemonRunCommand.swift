import ArgumentParser
import Foundation
import HearthIdentity

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
    @Flag(help: ArgumentHelp("Unlock the account key with the passphrase (asked for, or --passphrase-file, $HEARTH_PASSPHRASE) and keep it in memory: the daemon then renews the certificates of the household's devices as they come due. Never written to disk."))
    var unlock = false
    @OptionGroup var secret: PassphraseOptions

    func validate() throws {
        guard rescanInterval >= 0.1, rescanInterval <= 86_400 else { throw ValidationError("--rescan-interval must be 0.1-86400 seconds") }
    }

    func run() async throws {
        let directory = try RuntimeDirectory.prepare()
        let lock = try DaemonLock.acquire(in: directory)
        defer { lock.release() }
        let signals = SignalWaiter()
        var authority: AccountAuthority?
        if unlock {
            guard let identity = try global.currentIdentity() else {
                throw CommandError(.notSignedIn, "--unlock: not signed in to an account")
            }
            let passphrase = try secret.resolvedPassphrase()
            authority = try identityCall(wrongPassphrase: AccountCommand.wrongAccountPassphrase) {
                try global.accounts.loadAuthority(identity.account.id, passphrase: passphrase)
            }
        }
        let daemon = DeviceDaemon(global: global, options: store.storeOptions, rescanInterval: .milliseconds(Int(rescanInterval * 1000)),
                                  authority: authority)
        let control: ControlServer?
        do throws(CommandError) {
            control = try ControlServer(path: DaemonControl.path(in: directory))
        } catch {
            control = nil
            note("daemon: no control socket in \(directory) (\(error.message)); hearth daemon status will not reach it")
        }
        control?.start { line in await DaemonControl.answer(line, daemon: daemon) }
        let identity = try? global.currentIdentity()
        let whose: String = identity.map { "device \($0.deviceName) (\($0.deviceID.short)) in \($0.account.displayName) (\($0.account.id.short))" }
            ?? "this device (signed out)"
        if authority != nil { note("daemon: the account key is unlocked in memory; peers' certificates are renewed as they come due") }
        note("daemon \(getpid()): holding the stores of \(whose) under \(global.storeDataDirectory); peers: \(store.storeOptions.discoveryDescription). Ctrl-C to stop.")
        // Once at start (the journal keeps it); the daemon does not look again after a switch.
        global.warnIfCAKeyInClear()
        let running = Task { await daemon.run() }
        let reason = await signals.wait()
        if reason != .outputClosed { note("daemon: \(StoreSession.describe(reason)); saving and closing every store") }
        control?.stop()
        await daemon.stop()
        running.cancel()
    }
}
