import ArgumentParser
import Foundation
import HearthDaemon

/// `hearth watch`: prints external changes as they happen.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Keep a store synced and print each change made by other devices, with its reason, as it happens.",
        discussion: """
        One line per changed key: "serverChange (0): backgroundColor = 2" (reasons: serverChange 0, \
        initialSyncChange 1, quotaViolationChange 2, accountChange 3). With --json, one JSON object per change. \
        Stops cleanly (saving) on Ctrl-C, SIGTERM, or when its output is closed (hearth watch | head -n 1).
        """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: StoreOptions
    @Flag(help: "Watch a store that has no file on this device yet (it arrives from peers).") var create = false
    @Flag(help: "Print one JSON object per change for scripts.") var json = false

    func run() async throws {
        let access = try StoreAccess(global: global, options: store)
        if !create { try access.requireExisting(hint: "to wait for it from peers, add --create") }
        try await StoreSession(access: access, printChanges: true, json: json, label: "watching").run()
    }
}
