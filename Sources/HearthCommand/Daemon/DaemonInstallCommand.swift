import ArgumentParser
import Foundation
import HearthCore
import HearthDaemon

/// `hearth daemon install`: writes and enables the systemd user unit.
struct DaemonInstallCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Install the daemon as a systemd user service (started now and at each login).",
        discussion: "Where systemd's user manager is not available, writes the unit anyway and says what to run instead.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: PeerOptions

    func run() async throws {
        var command = [SystemdUserUnit.executable, "daemon", "run"]
        if let config = global.configDirectory { command += ["--config-dir", absolute(config)] }
        if let data = global.dataDirectory { command += ["--data-dir", absolute(data)] }
        command += store.peers.flatMap { ["--peer", $0] }
        if let port = store.port { command += ["--port", String(port)] }
        if store.listenHost != "0.0.0.0" { command += ["--listen", store.listenHost] }
        let unit = SystemdUserUnit(command: command)
        let folder = (unit.path as NSString).deletingLastPathComponent
        do {
            // 0700 like every folder Hearth makes (FileManager's default gave 0755); a folder
            // that exists keeps its mode.
            try AtomicFile.createDirectory(folder)
            try AtomicFile.write(Data(unit.text.utf8), to: unit.path)
        } catch {
            throw CommandError(.general, "cannot write \(unit.path): \(error)")
        }
        emit("wrote \(unit.path)")
        guard let reload = await systemctlUser(["daemon-reload"]), reload.status == 0,
              let enable = await systemctlUser(["enable", "--now", SystemdUserUnit.name]), enable.status == 0 else {
            let why = await systemctlUser(["is-system-running"]) == nil ? "systemctl is not installed" : "systemd's user manager is not reachable"
            emit("\(why), so the service is not enabled; start the daemon yourself at login instead, e.g. from your session's autostart:")
            let words: [String] = command.map { (word: String) -> String in word.contains(" ") ? "'\(word)'" : word }
            emit("  " + words.joined(separator: " "))
            return
        }
        emit("enabled and started \(SystemdUserUnit.name) (systemctl --user status \(SystemdUserUnit.name))")
    }

    private func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path)
    }
}
