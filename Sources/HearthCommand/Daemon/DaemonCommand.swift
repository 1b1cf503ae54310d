import ArgumentParser
import Foundation

/// `hearth daemon`: the device daemon (run, install, uninstall, status). See docs/daemon.md.
struct DaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run, install or ask the device daemon that keeps every store of this user synced, apps open or not.",
        discussion: """
        One daemon per user holds every store of the signed-in account on this device (and the \
        signed-out ones) and syncs them with the household's devices, so values arrive while apps \
        are closed. hearth set/get/status/peers reach a store through it. `hearth daemon` alone \
        runs it in the foreground (for systemd, or a terminal); `hearth daemon install` sets it up \
        as a systemd user service.
        """,
        subcommands: [DaemonRunCommand.self, DaemonInstallCommand.self, DaemonUninstallCommand.self, DaemonStatusCommand.self],
        defaultSubcommand: DaemonRunCommand.self)
}
