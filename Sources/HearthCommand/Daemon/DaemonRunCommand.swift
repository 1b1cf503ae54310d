import ArgumentParser
import Foundation
import HearthDaemon
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
        // Before any store is opened: a SIGTERM from then on saves and closes them.
        let signals = SignalWaiter()
        let options = DaemonOptions(folders: global.folders, peering: store.settings,
                                    rescanInterval: .milliseconds(Int(rescanInterval * 1000)), output: .standardStreams)
        // The passphrase is asked for once the lock is ours: not for a daemon that cannot run.
        let daemon = try DeviceDaemon.start(options) { () throws -> AccountAuthority? in
            guard unlock else { return nil }
            guard let identity = try global.currentIdentity() else {
                throw CommandError(.notSignedIn, "--unlock: not signed in to an account")
            }
            let passphrase = try secret.resolvedPassphrase()
            return try identityCall(wrongPassphrase: AccountCommand.wrongAccountPassphrase) {
                try global.accounts.loadAuthority(identity.account.id, passphrase: passphrase)
            }
        }
        let identity = try? global.currentIdentity()
        let whose: String = identity.map { "device \($0.deviceName) (\($0.deviceID.short)) in \($0.account.displayName) (\($0.account.id.short))" }
            ?? "this device (signed out)"
        if daemon.authority != nil { note("daemon: the account key is unlocked in memory; peers' certificates are renewed as they come due") }
        note("daemon \(getpid()): holding the stores of \(whose) under \(global.storeDataDirectory); peers: \(store.settings.discoveryDescription). Ctrl-C to stop.")
        // Once at start (the journal keeps it); the daemon does not look again after a switch.
        global.warnIfCAKeyInClear()
        let reason = await signals.wait()
        if reason != .outputClosed { note("daemon: \(StoreSession.describe(reason)); saving and closing every store") }
        await daemon.stop()
    }
}
