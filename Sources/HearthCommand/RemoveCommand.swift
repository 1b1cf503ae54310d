import ArgumentParser
import Foundation
import Hearth
import HearthDaemon

/// `hearth rm`: removes a key everywhere.
struct RemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Remove a key, then wait until a peer device confirms it (when signed in).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: StoreOptions
    @Argument(help: "The key to remove.") var key: String
    @OptionGroup var delivery: DeliveryOptions
    @Flag(help: "Print JSON for scripts.") var json = false

    func run() async throws {
        let access = try StoreAccess(global: global, options: store)
        try access.requireExisting(hint: "nothing to remove")
        let (outcome, route) = try await WriteRequest(store: access.storeIdentifier, key: key, value: nil, wait: delivery.wait,
                                                      minimumPeers: delivery.minimumPeers).perform(access)
        if json {
            emit("{\"key\":\(PropertyListJSON.quote(key)),\"removed\":true,\(outcome.jsonFields)}")
        } else {
            emit("removed \(key)")
            note(outcome.sentence(route: route))
        }
        try outcome.requireNoFailure(done: "removed")
    }
}
