import Foundation
import Hearth
import HearthCore

/// How much of a store is used and how much is not yet confirmed, from its replica (the live
/// one in the holder, or the saved file).
package struct StoreFigures: Sendable, Equatable {
    package var keys: Int
    package var usageBytes: Int
    /// Entries some known peer has not acknowledged (all of them when no peer is known yet).
    package var pending: Int
    package var knownPeers: Int
    /// What peers refused of this device's writes (each for people): known only to the
    /// process that syncs the store.
    package var refused: [String] = []

    package init(_ replica: Replica, refusals: [SyncRefusal] = []) {
        refused = refusals.map(\.description)
        keys = replica.usage.keys
        usageBytes = replica.usage.bytes
        let stable = replica.stableVector
        pending = replica.entries.values.filter { entry in stable.map { !$0.covers(entry) } ?? true }.count
        knownPeers = replica.peerVectors.count
    }

    package init(keys: Int, usageBytes: Int, pending: Int, knownPeers: Int, refused: [String] = []) {
        self.refused = refused
        self.keys = keys
        self.usageBytes = usageBytes
        self.pending = pending
        self.knownPeers = knownPeers
    }
}

/// What the process holding a store (`serve`, `watch`) says about it, for `hearth peers` and
/// `hearth status`: the answer to a `status` request (``ControlRequest``).
package struct LiveStatus: Sendable {
    package var pid: Int32
    package var store: String
    package var port: Int?
    package var device: String?
    package var connectedPeers: [String]
    package var discoveredPeers: [String]
    package var discovery: String
    /// When entries last moved between this store and a peer.
    package var lastExchange: Date?
    package var entriesSent: Int
    package var entriesReceived: Int
    package var figures: StoreFigures

    package var fields: JSONObject {
        var object = JSONObject([
            "pid": .integer(Int64(pid)), "store": .string(store),
            "connectedPeers": .array(connectedPeers.map(PropertyListValue.string)),
            "discoveredPeers": .array(discoveredPeers.map(PropertyListValue.string)),
            "discovery": .string(discovery),
            "entriesSent": .integer(Int64(entriesSent)), "entriesReceived": .integer(Int64(entriesReceived)),
            "keys": .integer(Int64(figures.keys)), "usageBytes": .integer(Int64(figures.usageBytes)),
            "pending": .integer(Int64(figures.pending)), "knownPeers": .integer(Int64(figures.knownPeers)),
            "refused": .array(figures.refused.map(PropertyListValue.string)),
        ])
        if let port { object["port"] = .integer(Int64(port)) }
        if let device { object["device"] = .string(device) }
        if let lastExchange { object["lastExchange"] = .string(PropertyListJSON.dateString(lastExchange)) }
        return object
    }

    package init(pid: Int32, store: String, port: Int?, device: String?, connectedPeers: [String], discoveredPeers: [String],
         discovery: String, lastExchange: Date?, entries: (sent: Int, received: Int)?, figures: StoreFigures) {
        self.pid = pid
        self.store = store
        self.port = port
        self.device = device
        self.connectedPeers = connectedPeers
        self.discoveredPeers = discoveredPeers
        self.discovery = discovery
        self.lastExchange = lastExchange
        entriesSent = entries?.sent ?? 0
        entriesReceived = entries?.received ?? 0
        self.figures = figures
    }

    package init(_ object: JSONObject) throws(CommandError) {
        guard let pid = object.integer("pid"), let store = object.string("store"), let connected = object.strings("connectedPeers") else {
            throw CommandError(.general, "the hearth process that holds the store sent a malformed status")
        }
        self.pid = Int32(clamping: pid)
        self.store = store
        port = object.integer("port").map { Int($0) }
        device = object.string("device")
        connectedPeers = connected
        discoveredPeers = object.strings("discoveredPeers") ?? []
        discovery = object.string("discovery") ?? ""
        lastExchange = object.date("lastExchange")
        entriesSent = Int(object.integer("entriesSent") ?? 0)
        entriesReceived = Int(object.integer("entriesReceived") ?? 0)
        figures = StoreFigures(keys: Int(object.integer("keys") ?? 0), usageBytes: Int(object.integer("usageBytes") ?? 0),
                               pending: Int(object.integer("pending") ?? 0), knownPeers: Int(object.integer("knownPeers") ?? 0),
                               refused: object.strings("refused") ?? [])
    }

    /// Asks the process holding the store at `location` (nil when none answers), on its control
    /// socket under `socketBase`; throws if the control socket's folder or listener is not this
    /// user's (``ControlSocket/exchange(_:with:timeout:)``).
    package static func ask(_ location: StoreLocation, socketBase: String, timeout: Duration = .seconds(5)) async throws(CommandError) -> LiveStatus? {
        let line = ControlRequest.status(store: location.storeIdentifier).line
        guard case .reply(let reply) = try await ControlSocket.exchange(line, with: ControlSocket.path(for: location, under: socketBase),
                                                                       timeout: timeout) else {
            return nil
        }
        return try? LiveStatus(ControlRequest.fields(ofReply: reply))
    }
}
