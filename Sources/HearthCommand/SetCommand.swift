import ArgumentParser
import Foundation
import Hearth
import HearthCore
import HearthDaemon

/// `hearth set`: writes one value and makes sure the account's other devices have it.
struct SetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Set a key's value, then wait until a peer device confirms it (when signed in).",
        discussion: """
        The value is JSON unless a typed flag gives it:
          hearth set --store com.example.colors backgroundColor 2
          hearth set --store com.example.notes title --string "Groceries"
          hearth set --store com.example.notes note-1 '{"title": "Milk", "done": false}'
          hearth set --store com.example.notes big --value-file note.json       (or - for standard input)
          hearth set --store com.example.notes logo --value-file logo.png --as data
        Creates the store on this device if it has no file yet. If hearth serve or hearth watch holds \
        the store, the write is sent to that process, which applies it and waits for peers; if that \
        process stops before answering, the write is settled here, or reported as of unknown outcome (status 9).
        """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: StoreOptions
    @Argument(help: "The key (at most 64 bytes of UTF-8).") var key: String
    @OptionGroup var value: ValueOptions
    @OptionGroup var delivery: DeliveryOptions
    @Flag(help: "Print JSON for scripts.") var json = false

    func run() async throws {
        let access = try StoreAccess(global: global, options: store)
        let newValue = try value.resolve()
        let (outcome, route) = try await WriteRequest(store: access.storeIdentifier, key: key, value: newValue, wait: delivery.wait,
                                                      minimumPeers: delivery.minimumPeers).perform(access)
        if json {
            emit("{\"key\":\(PropertyListJSON.quote(key)),\"value\":\(PropertyListJSON.string(newValue)),\(outcome.jsonFields)}")
        } else {
            emit("\(key) = \(PropertyListJSON.human(newValue))")
            note(outcome.sentence(route: route))
        }
        try outcome.requireNoFailure(done: "saved")
    }
}

/// How long `set` and `rm` wait for peers to confirm a change.
struct DeliveryOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Seconds to wait for peers to confirm the change (0: do not wait).", valueName: "seconds"))
    var wait: Double = 5

    @Option(name: .customLong("min-peers"), help: ArgumentHelp("How many peer devices must confirm.", valueName: "n"))
    var minimumPeers = 1

    /// What became of a write (``WriteOutcome``, in the daemon library: holders report it too).
    typealias Outcome = WriteOutcome

    func validate() throws {
        guard wait >= 0, wait <= 3600 else { throw ValidationError("--wait must be 0 to 3600 seconds") }
        guard minimumPeers >= 1 else { throw ValidationError("--min-peers must be at least 1") }
    }
}
