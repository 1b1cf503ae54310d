import ArgumentParser
import Foundation
import HearthDaemon
import Logging

/// `hearth`: accounts, store values, watching and serving from the command line.
@main
struct HearthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hearth",
        abstract: "Sign this device in to a household account and read, write, watch and sync Hearth stores.",
        discussion: """
        A household is an account; each device joins it with a join bundle and the account passphrase, \
        or by pairing with a member on the LAN (the two compare a code, the member's person gives the passphrase). \
        Stores sync with the account's other devices on the LAN: found with mDNS (Avahi), \
        or the peers in $HEARTH_PEERS / --peer.

        EXAMPLES
          hearth account create --name "Home" --device laptop     (prints the account passphrase once)
          hearth account export --output home.bundle
          hearth account join home.bundle --device kitchen        (asks for the account passphrase)
          hearth account join --pair --device kitchen             (or: ask a member on the LAN; on it: hearth device approve)
          hearth set --store com.example.colors backgroundColor 2
          hearth get --store com.example.colors backgroundColor --json
          hearth watch --store com.example.colors

        \(CommandError.helpTable)
        """,
        subcommands: [AccountCommand.self, DeviceCommand.self, GetCommand.self, SetCommand.self, RemoveCommand.self, ListCommand.self,
                      WatchCommand.self, PeersCommand.self, StatusCommand.self, ServeCommand.self, DaemonCommand.self]
    )

    /// Parses, runs, and turns every failure into one line on stderr and a documented status.
    static func main() async {
        SignalWaiter.unblockTerminationSignals()
        // A closed output is an EPIPE to handle (StandardStreams), never a silent death by SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        // Library logs go to stderr, never into output meant for scripts.
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
            finish(0)
        } catch let error as CommandError {
            fail(error.status.rawValue, error.message)
        } catch let error as ExitCode {
            finish(error.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                exit(withError: error)      // --help, --version: print and exit 0
            }
            var message = fullMessage(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            if message.hasPrefix("Error: ") { message.removeFirst("Error: ".count) }
            if code == .validationFailure {
                fail(CommandError.Status.usage.rawValue, message + " (see hearth --help)")
            }
            fail(CommandError.Status.general.rawValue, message)
        }
    }

    private static func fail(_ status: Int32, _ message: String) -> Never {
        note("hearth: \(message)")
        finish(status)
    }

    /// Ends the process without atexit handlers. Every command has closed (saved) its store by
    /// now; what atexit would add is OpenSSL's global cleanup, which can race a library thread
    /// still freeing a TLS context after sync stopped (seen once as a SIGSEGV in libcrypto
    /// under heavy load).
    private static func finish(_ status: Int32) -> Never {
        fflush(nil)
        _exit(status)
    }
}
