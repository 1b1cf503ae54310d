import ArgumentParser
import Foundation
import Hearth
import HearthDaemon

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
        // Keys are exact (two may differ only in Unicode normalisation), so no Swift dictionary here.
        let keys = values.keys.sorted()
        if json {
            emit("{" + keys.map { "\(PropertyListJSON.quote($0.string)):\(PropertyListJSON.string(values[$0]!))" }.joined(separator: ",") + "}")
            return
        }
        if values.isEmpty { note("store \(access.storeIdentifier) is empty") }
        for key in keys { emit("\(key) = \(PropertyListJSON.human(values[key]!))") }
    }
}
