import ArgumentParser
import Foundation
import Hearth
import HearthCore
import HearthDaemon

/// `hearth daemon status`: whether the daemon runs, and its stores, peers and connections.
struct DaemonStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Say whether the daemon runs, and list its stores with their peers and connections.")

    /// Accepted so that the same options work with every subcommand; the daemon is found
    /// by its runtime folder, whichever folders it holds.
    @OptionGroup var global: GlobalOptions
    @Flag(help: "JSON output: the daemon's status reply as it is.") var json = false

    func run() async throws {
        let directory = RuntimeDirectory.path()
        switch try await DaemonControl.askStatus(in: directory, timeout: .seconds(5)) {
        case .reply(let line):
            let reply = try ControlRequest.fields(ofReply: line)
            if json { return emit(line) }
            var stores: [PropertyListValue] = []
            if case .array(let items)? = reply["stores"] { stores = items }
            let pid: Int64 = reply.integer("pid") ?? 0
            let folder: String = reply.string("dataDirectory") ?? "?"
            emit("daemon    running, pid \(pid), \(stores.count) store\(stores.count == 1 ? "" : "s") under \(folder)")
            for case .dictionary(let fields) in stores {
                emit(Self.line(for: JSONObject(fields)))
            }
        case .noReply:
            throw CommandError(.general, "the daemon (pid \(DaemonLock.runningPid(in: directory).map(String.init) ?? "?")) did not answer within 5 s")
        case .noListener:
            if let pid = DaemonLock.runningPid(in: directory) {
                throw CommandError(.general, "a daemon runs (pid \(pid)) but has no control socket at \(DaemonControl.path(in: directory))")
            }
            throw CommandError(.daemonNotRunning, "no Hearth daemon runs for this user (start one with hearth daemon, or hearth daemon install)")
        }
    }

    /// One store's line: "store     ID: N keys, port P, K connected peers (…), M pending".
    private static func line(for store: JSONObject) -> String {
        let peers: [String] = store.strings("connectedPeers") ?? []
        let identifier: String = store.string("store") ?? "?"
        let keys: Int64 = store.integer("keys") ?? 0
        let port: String = store.integer("port").map { "port \($0)" } ?? "not syncing"
        let plural: String = peers.count == 1 ? "" : "s"
        let short: [String] = peers.map { String($0.prefix(8)) }
        let list: String = peers.isEmpty ? "" : " (" + short.joined(separator: ", ") + ")"
        let pending: Int64 = store.integer("pending") ?? 0
        return "store     \(identifier): \(keys) keys, \(port), \(peers.count) connected peer\(plural)\(list), \(pending) pending"
    }
}
