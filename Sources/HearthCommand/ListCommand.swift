import ArgumentParser
import Foundation
import Hearth

/// `hearth list`: every key of a store.
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Print every key and value of a store as this device has it.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: StoreOptions
    @Flag(help: "Print one JSON object for scripts.") var json = false

    func run() async throws {
        let access = try StoreAccess(global: global, options: store)
        let values = try access.readReplica().visibleValues
        if json {
            emit(PropertyListJSON.string(.dictionary(values)))
            return
        }
        if values.isEmpty { note("store \(access.storeIdentifier) is empty") }
        for key in values.keys.sorted() { emit("\(key) = \(PropertyListJSON.human(values[key]!))") }
    }
}
