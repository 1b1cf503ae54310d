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
enum DaemonControl {
    static func path(in directory: String) -> String { (directory as NSString).appendingPathComponent("daemon.sock") }

    static func answer(_ line: String, daemon: DeviceDaemon) -> String {
        guard let request = JSONObject(line: line) else {
            return ControlRequest.reply(CommandError(.usage, "not a JSON object"))
        }
        guard request.string("op") == "daemon-status" else {
            return ControlRequest.reply(CommandError(.usage, "unknown request op \(request.string("op").map { String(reflecting: $0) } ?? "(none)")"))
        }
        let stores = daemon.stores.map { hosted -> PropertyListValue in
            var fields = hosted.liveStatus().fields.fields
            fields["file"] = .string(hosted.access.location.filePath)
            return .dictionary(fields)
        }
        var reply = JSONObject(["status": .integer(0), "pid": .integer(Int64(getpid())), "stores": .array(stores)])
        reply["dataDirectory"] = .string(daemon.global.storeDataDirectory)
        return reply.line
    }
}
