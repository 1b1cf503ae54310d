import ArgumentParser
import Foundation
import HearthDaemon

/// `hearth daemon uninstall`: stops and disables the systemd user unit and removes it.
struct DaemonUninstallCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "uninstall",
        abstract: "Stop the daemon's systemd user service and remove its unit. The stores stay on disk.")

    func run() async throws {
        let unit = SystemdUserUnit(command: [])
        let disabled = await systemctlUser(["disable", "--now", SystemdUserUnit.name])
        if FileManager.default.fileExists(atPath: unit.path) {
            do {
                try FileManager.default.removeItem(atPath: unit.path)
            } catch {
                throw CommandError(.general, "cannot remove \(unit.path): \(error)")
            }
            emit("removed \(unit.path)")
            _ = await systemctlUser(["daemon-reload"])
        } else {
            emit("no unit at \(unit.path); nothing to remove")
        }
        if disabled?.status != 0 {
            emit("systemd's user manager did not stop \(SystemdUserUnit.name) (not running under systemd?); "
                 + "a daemon started by hand stops with Ctrl-C or SIGTERM")
        }
    }
}
