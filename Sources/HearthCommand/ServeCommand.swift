import ArgumentParser
import Foundation

/// `hearth serve`: keeps a store synced, as a daemon.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Keep a store synced with the account's other devices until SIGINT or SIGTERM (a daemon for systemd and friends).",
        discussion: """
        Creates the store on this device if needed, follows account switches, and saves before exiting. \
        While it runs, hearth get/list read the store, and hearth peers/status show its connections; \
        hearth set/rm on the same store exit with status 6 (the store is open here).
        """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: StoreOptions
    @Flag(help: "Also print each external change, as hearth watch does.") var verbose = false

    func run() async throws {
        let access = try StoreAccess(global: global, options: store)
        try await StoreSession(access: access, printChanges: verbose, json: false, label: "serving").run()
    }
}
