import Foundation
import Hearth
import HearthCore

/// What became of a write: how many peer devices confirmed having it, of how many required.
package enum WriteOutcome: Sendable, Equatable {
    case local
    /// Saved, not synced from this process, for the reason given: the store is attached to the
    /// process that holds it (an app), which syncs it and alone hears peers' answers; or, signed
    /// in, sync is paused or could not start (``StoreInternals/notSyncingReason``).
    case notSyncing(String)
    case confirmed(peers: Int, required: Int)
    case unconfirmed(peers: Int, required: Int)
    /// Peer devices refused it (each reason, for people); the rest of sync goes on.
    case refused(String)
    case failed(String)

    package var sentence: String {
        switch self {
        case .local: "saved on this device (signed out: not synced)"
        case .notSyncing(let reason): "saved on this device (\(reason))"
        case .confirmed(let peers, _): "confirmed by \(peers) peer device\(peers == 1 ? "" : "s")"
        case .unconfirmed(let peers, let required):
            (peers == 0 ? "saved on this device; no peer confirmed it in time"
                : "saved on this device; \(peers) of the \(required) required peer devices confirmed it in time")
                + " (it syncs when this store next runs with a peer reachable, e.g. hearth serve)"
        case .refused(let reasons): "saved on this device, but a peer refused it: \(reasons)"
        case .failed(let reason): "saved on this device; sync failed: \(reason)"
        }
    }

    /// ``sentence``, saying which process applied the write.
    package func sentence(route: WriteRequest.Route) -> String { sentence + route.remark }

    /// Throws the command's error if sync failed; `done` says what happened on this device.
    package func requireNoFailure(done: String) throws {
        if case .failed(let reason) = self { throw CommandError(.general, "\(done) on this device, but sync failed: \(reason)") }
        if case .refused(let reasons) = self { throw CommandError(.general, "\(done) on this device, but a peer refused it: \(reasons)") }
    }

    package var jsonFields: String {
        switch self {
        case .local: "\"synced\":false,\"peers\":0"
        case .notSyncing(let reason): "\"synced\":false,\"peers\":0,\"notSyncing\":\(PropertyListJSON.quote(reason))"
        case .confirmed(let peers, let required): "\"synced\":true,\"peers\":\(peers),\"required\":\(required)"
        case .unconfirmed(let peers, let required): "\"synced\":false,\"peers\":\(peers),\"required\":\(required)"
        case .refused(let reasons): "\"synced\":false,\"peers\":0,\"refused\":\(PropertyListJSON.quote(reasons))"
        case .failed: "\"synced\":false,\"peers\":0"
        }
    }

    /// The fields of a holder's reply that carry this outcome.
    package var replyFields: JSONObject {
        switch self {
        case .local: JSONObject(["outcome": .string("local")])
        // "local" with the reason: a holder of an older build reads it as it did.
        case .notSyncing(let reason): JSONObject(["outcome": .string("local"), "message": .string(reason)])
        case .confirmed(let peers, let required):
            JSONObject(["outcome": .string("confirmed"), "peers": .integer(Int64(peers)), "required": .integer(Int64(required))])
        case .unconfirmed(let peers, let required):
            JSONObject(["outcome": .string("unconfirmed"), "peers": .integer(Int64(peers)), "required": .integer(Int64(required))])
        case .refused(let reasons): JSONObject(["outcome": .string("refused"), "message": .string(reasons)])
        case .failed(let reason): JSONObject(["outcome": .string("failed"), "message": .string(reason)])
        }
    }

    package init(replyFields object: JSONObject) throws {
        let peers = Int(object.integer("peers") ?? 0), required = Int(object.integer("required") ?? 1)
        switch object.string("outcome") {
        case "local": self = object.string("message").map(WriteOutcome.notSyncing) ?? .local
        case "confirmed": self = .confirmed(peers: peers, required: required)
        case "unconfirmed": self = .unconfirmed(peers: peers, required: required)
        case "failed": self = .failed(object.string("message") ?? "unknown")
        case "refused": self = .refused(object.string("message") ?? "a peer device")
        default: throw CommandError(.general, "the hearth process that holds the store sent a malformed reply")
        }
    }

    /// Waits until at least `minimumPeers` connected peer devices have confirmed having every
    /// change of the store (and it is on disk either way); reports how many did, or that a
    /// peer refused `key`'s write (most often: this device's clock is hours ahead).
    package static func deliver(_ store: UbiquitousKeyValueStore, key: String, wait: Double, minimumPeers: Int) async -> WriteOutcome {
        await store.internals.synchronizeOffPool()
        guard store.isSyncing else {
            // Attached, the write goes to the process that holds the store: it syncs it, and
            // peers' confirmations and refusals (a clock ahead, say) go to it, not here.
            if store.internals.isAttached { return .notSyncing("the process that holds the store syncs it; peers answer it, not this command") }
            guard let reason = store.internals.notSyncingReason, reason != .signedOut else { return .local }
            return .notSyncing(reason.description)
        }
        do {
            _ = try await store.syncPort()
        } catch {
            return .failed("\(error)")
        }
        let deadline = ContinuousClock.now + .milliseconds(Int(wait * 1000))
        var confirmed = 0
        var refusals: [SyncRefusal] = []
        // Checked again each time the engine says a peer connected, left, acknowledged or
        // refused (no polling), and once more after the deadline: on a busy machine it may pass
        // while this task waits to run.
        let done = await store.internals.waitForSync(until: deadline) {
            // A peer that refused a write of another key has answered for it: it counts as confirming.
            // Counted before the refusals are read: a peer's refusal arrives before its ack.
            confirmed = store.confirmingPeerCount
            refusals = store.syncRefusals.filter { $0.entry.key == StoreKey(key) }
            return !refusals.isEmpty || confirmed >= minimumPeers
        }
        if !refusals.isEmpty {
            return .refused(refusals.map(\.description).joined(separator: "; "))
        }
        return done ? .confirmed(peers: confirmed, required: minimumPeers) : .unconfirmed(peers: confirmed, required: minimumPeers)
    }
}
