import ArgumentParser
import Foundation
import Hearth
import HearthCore

/// `hearth get`: one value, as this device has it.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print a key's value as this device has it (read from the store's file; works while hearth serve runs).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: StoreOptions
    @Argument(help: "The key.") var key: String
    @Flag(help: "Print the value as JSON (see hearth set) for scripts.") var json = false

    func run() async throws {
        let access = try StoreAccess(global: global, options: store)
        guard let value = try access.readReplica().value(forKey: StoreKey(key)) else {
            throw CommandError(.notFound, "no value for \(key) in store \(access.storeIdentifier)")
        }
        emit(json ? PropertyListJSON.string(value) : PropertyListJSON.human(value))
    }
}
