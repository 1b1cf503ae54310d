import ArgumentParser
import Foundation
import HearthDaemon

/// `hearth serve`: keeps a store synced, as a daemon.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Keep a store synced with the account's other devices until SIGINT or SIGTERM (a daemon for systemd and friends).",
        discussion: """
        Creates the store on this device if needed, follows account switches, and saves before exiting. \
        If another process holds the store, waits (saying so) until it is free. \
        While it runs, hearth get/list read the store, hearth peers/status ask it for its connections, and \
        hearth set/rm send their writes to it (through a Unix socket only this user can open). \
        Idle, it writes nothing to disk.
        """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: StoreOptions
    @Flag(help: "Also print each external change, as hearth watch does.") var verbose = false

    func run() async throws {
        // Once at start: serve runs for long, often where nobody reads its stderr again.
        global.warnIfCAKeyInClear()
        let access = try StoreAccess(global: global, options: store)
        try await StoreSession(access: access, printChanges: verbose, json: false, label: "serving").run()
    }
}
