import ArgumentParser
import Foundation
import Hearth
import HearthCore
import HearthDaemon

/// `hearth get`: one value, as this device has it.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print a key's value as this device has it (asked of the hearth process holding the store, if one does; else read from the store's file).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: StoreOptions
    @Argument(help: "The key.") var key: String
    @Flag(help: "Print the value as JSON (see hearth set) for scripts.") var json = false

    func run() async throws {
        let access = try StoreAccess(global: global, options: store)
        // A serve or watch holding the store has what it applied in memory before its file does.
        let request = ControlRequest.get(store: access.storeIdentifier, key: key, json: json)
        if case .reply(let line) = try await ControlSocket.exchange(request.line, with: ControlSocket.path(for: access.location, under: access.folders.controlSocketBase),
                                                                      timeout: .seconds(10)) {
            switch Result(catching: { () throws(CommandError) in try ControlRequest.fields(ofReply: line) }) {
            case .success(let fields):
                if let text = fields.string("text") {
                    emit(text)
                    return
                }
            case .failure(let error):
                // A holder from before `get` was a request knows no such op: the file, as then.
                guard error.status == .usage else { throw error }
            }
        }
        guard let value = try access.readReplica().value(forKey: StoreKey(key)) else {
            throw CommandError(.notFound, "no value for \(key) in store \(access.storeIdentifier)")
        }
        emit(json ? PropertyListJSON.string(value) : PropertyListJSON.human(value))
    }
}
