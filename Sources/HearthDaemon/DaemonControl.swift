import Foundation
import Hearth
import HearthCore

/// The daemon's own control socket (`daemon.sock` in the ``RuntimeDirectory``): one JSON
/// request line, one reply line, as the stores' control sockets (``ControlSocket``). Each held
/// store also keeps its own socket, so `hearth set/get/status --store S` reach it as they
/// reach any holder.
///
/// Requests: `{"op":"daemon-status"}` → `{"status":0,"pid":…,"stores":[{"store":…,"port":…,
/// "connectedPeers":[…],"keys":…,"pending":…}]}`.
package enum DaemonControl {
    package static func path(in directory: String) -> String { (directory as NSString).appendingPathComponent("daemon.sock") }

    package static func answer(_ line: String, daemon: DeviceDaemon) async -> String {
        guard let request = JSONObject(line: line) else {
            return ControlRequest.reply(CommandError(.usage, "not a JSON object"))
        }
        switch request.string("op") {
        case "daemon-status": return status(daemon)
        case "hold": return await hold(request, daemon: daemon)
        case let op: return ControlRequest.reply(CommandError(.usage, "unknown request op \(op.map { String(reflecting: $0) } ?? "(none)")"))
        }
    }

    /// `{"op":"hold","dataDirectory":D,"store":S}`: an app about to open S asks the daemon to
    /// hold it first, so the app attaches instead of hosting it (docs/daemon.md). Answers
    /// `{"status":0,"held":true}` once held; `"held":false` if another process holds it, or D
    /// is not the daemon's data directory.
    private static func hold(_ request: JSONObject, daemon: DeviceDaemon) async -> String {
        guard let store = request.string("store"), !store.isEmpty, let directory = request.string("dataDirectory") else {
            return ControlRequest.reply(CommandError(.usage, "hold needs a store and a dataDirectory"))
        }
        let ours = URL(fileURLWithPath: daemon.folders.storeDataDirectory).standardizedFileURL.path
        guard URL(fileURLWithPath: directory).standardizedFileURL.path == ours else {
            return JSONObject(["status": .integer(0), "held": .bool(false), "reason": .string("the daemon holds the stores of \(ours)")]).line
        }
        let held = await daemon.hold(store)
        return JSONObject(["status": .integer(0), "held": .bool(held)]).line
    }

    private static func status(_ daemon: DeviceDaemon) -> String {
        let stores = daemon.stores.map { hosted -> PropertyListValue in
            var fields = hosted.liveStatus().fields.fields
            fields["file"] = .string(hosted.access.location.filePath)
            return .dictionary(fields)
        }
        var reply = JSONObject(["status": .integer(0), "pid": .integer(Int64(getpid())), "stores": .array(stores)])
        reply["dataDirectory"] = .string(daemon.folders.storeDataDirectory)
        return reply.line
    }

    /// Asks the daemon whose runtime folder is `directory` for its status (the client side of
    /// `daemon-status`, for `hearth daemon status`); throws, having sent nothing, if the folder
    /// or the listener is not this user's.
    package static func askStatus(in directory: String, timeout: Duration) async throws(CommandError) -> ControlSocket.Exchange {
        try await ControlSocket.exchange(#"{"op":"daemon-status"}"#, with: path(in: directory), timeout: timeout)
    }

    /// Asks this user's daemon, if one runs, to hold the store at `location` (the client side
    /// of `hold`); true if it does now. Throws, having sent nothing, if the runtime folder is
    /// not this user's private folder (another user may have made it to pose as the daemon).
    package static func askToHold(_ location: StoreLocation, runtimeDirectory directory: String = RuntimeDirectory.path()) async throws(CommandError) -> Bool {
        guard try RuntimeDirectory.existsAndIsOurs(directory), DaemonLock.runningPid(in: directory) != nil else { return false }
        let request = JSONObject(["op": .string("hold"), "store": .string(location.storeIdentifier),
                                  "dataDirectory": .string(location.dataDirectory)]).line
        guard case .reply(let line) = try await ControlSocket.exchange(request, with: path(in: directory), timeout: .seconds(10)),
              let reply = JSONObject(line: line) else { return false }
        return reply.bool("held") == true
    }
}
