import Foundation

/// The systemd user unit that runs the daemon at login (`systemctl --user`):
/// `$XDG_CONFIG_HOME/systemd/user/hearth.service`.
package struct SystemdUserUnit {
    package static let name = "hearth.service"

    package let path: String
    /// The daemon's command line: this `hearth` binary, `daemon run`, and the options given
    /// to `install` (a data or config folder other than the default, peers).
    package let command: [String]

    package init(command: [String], environment: [String: String] = ProcessInfo.processInfo.environment) {
        let config: String
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            config = xdg
        } else {
            config = ((environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()) as NSString)
                .appendingPathComponent(".config")
        }
        path = "\(config)/systemd/user/\(Self.name)"
        self.command = command
    }

    package var text: String {
        """
        # Written by `hearth daemon install`; removed by `hearth daemon uninstall`.
        [Unit]
        Description=Hearth device daemon: keeps this user's Hearth stores synced with the household's devices
        Documentation=https://github.com/hearth/hearth/blob/main/docs/daemon.md
        After=network-online.target avahi-daemon.service
        Wants=network-online.target

        [Service]
        Type=simple
        ExecStart=\(command.map(Self.quote).joined(separator: " "))
        Restart=on-failure
        RestartSec=2

        [Install]
        WantedBy=default.target

        """
    }

    /// systemd's quoting for ExecStart: double quotes, with backslash, quote, `$` and `%` escaped.
    package static func quote(_ word: String) -> String {
        var out = "\""
        for c in word {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "$": out += "$$"
            case "%": out += "%%"
            default: out.append(c)
            }
        }
        return out + "\""
    }

    /// The path of the running `hearth` binary, for ExecStart (systemd needs an absolute path).
    package static var executable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }
}

/// Runs `systemctl --user ARGS` on a thread of its own (it blocks), returning nil if systemctl
/// is not installed, else its status and what it printed.
package func systemctlUser(_ arguments: [String]) async -> (status: Int32, output: String)? {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["systemctl", "--user"] + arguments
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            do {
                try process.run()
            } catch {
                continuation.resume(returning: nil)
                return
            }
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            // env says 127 when it cannot find the program.
            continuation.resume(returning: process.terminationStatus == 127 ? nil : (process.terminationStatus, output))
        }
    }
}
