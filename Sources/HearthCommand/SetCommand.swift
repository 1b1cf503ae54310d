import ArgumentParser
import Foundation
import Hearth
import HearthCore

/// `hearth set`: writes one value and makes sure the account's other devices have it.
struct SetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Set a key's value, then wait until a peer device confirms it (when signed in).",
        discussion: """
        The value is JSON unless a typed flag gives it:
          hearth set --store com.example.colors backgroundColor 2
          hearth set --store com.example.notes title --string "Groceries"
          hearth set --store com.example.notes note-1 '{"title": "Milk", "done": false}'
          hearth set --store com.example.notes big --value-file note.json       (or - for standard input)
          hearth set --store com.example.notes logo --value-file logo.png --as data
        Creates the store on this device if it has no file yet. If hearth serve or hearth watch holds \
        the store, the write is sent to that process, which applies it and waits for peers; if that \
        process stops before answering, the write is settled here, or reported as of unknown outcome (status 9).
        """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: StoreOptions
    @Argument(help: "The key (at most 64 bytes of UTF-8).") var key: String
    @OptionGroup var value: ValueOptions
    @OptionGroup var delivery: DeliveryOptions
    @Flag(help: "Print JSON for scripts.") var json = false

    func run() async throws {
        let access = try StoreAccess(global: global, options: store)
        let newValue = try value.resolve()
        let (outcome, route) = try await WriteRequest(store: access.storeIdentifier, key: key, value: newValue, wait: delivery.wait,
                                                      minimumPeers: delivery.minimumPeers).perform(access)
        if json {
            emit("{\"key\":\(PropertyListJSON.quote(key)),\"value\":\(PropertyListJSON.string(newValue)),\(outcome.jsonFields)}")
        } else {
            emit("\(key) = \(PropertyListJSON.human(newValue))")
            note(outcome.sentence(route: route))
        }
        try outcome.requireNoFailure(done: "saved")
    }
}

/// How long `set` and `rm` wait for peers to confirm a change.
struct DeliveryOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Seconds to wait for peers to confirm the change (0: do not wait).", valueName: "seconds"))
    var wait: Double = 5

    @Option(name: .customLong("min-peers"), help: ArgumentHelp("How many peer devices must confirm.", valueName: "n"))
    var minimumPeers = 1

    /// What became of a write: how many peer devices confirmed having it, of how many required.
    enum Outcome: Sendable, Equatable {
        case local
        case confirmed(peers: Int, required: Int)
        case unconfirmed(peers: Int, required: Int)
        /// Peer devices refused it (each reason, for people); the rest of sync goes on.
        case refused(String)
        case failed(String)

        var sentence: String {
            switch self {
            case .local: "saved on this device (signed out: not synced)"
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
        func sentence(route: WriteRequest.Route) -> String { sentence + route.remark }

        /// Throws the command's error if sync failed; `done` says what happened on this device.
        func requireNoFailure(done: String) throws {
            if case .failed(let reason) = self { throw CommandError(.general, "\(done) on this device, but sync failed: \(reason)") }
            if case .refused(let reasons) = self { throw CommandError(.general, "\(done) on this device, but a peer refused it: \(reasons)") }
        }

        var jsonFields: String {
            switch self {
            case .local: "\"synced\":false,\"peers\":0"
            case .confirmed(let peers, let required): "\"synced\":true,\"peers\":\(peers),\"required\":\(required)"
            case .unconfirmed(let peers, let required): "\"synced\":false,\"peers\":\(peers),\"required\":\(required)"
            case .refused(let reasons): "\"synced\":false,\"peers\":0,\"refused\":\(PropertyListJSON.quote(reasons))"
            case .failed: "\"synced\":false,\"peers\":0"
            }
        }

        /// The fields of a holder's reply that carry this outcome.
        var replyFields: JSONObject {
            switch self {
            case .local: JSONObject(["outcome": .string("local")])
            case .confirmed(let peers, let required):
                JSONObject(["outcome": .string("confirmed"), "peers": .integer(Int64(peers)), "required": .integer(Int64(required))])
            case .unconfirmed(let peers, let required):
                JSONObject(["outcome": .string("unconfirmed"), "peers": .integer(Int64(peers)), "required": .integer(Int64(required))])
            case .refused(let reasons): JSONObject(["outcome": .string("refused"), "message": .string(reasons)])
            case .failed(let reason): JSONObject(["outcome": .string("failed"), "message": .string(reason)])
            }
        }

        init(replyFields object: JSONObject) throws {
            let peers = Int(object.integer("peers") ?? 0), required = Int(object.integer("required") ?? 1)
            switch object.string("outcome") {
            case "local": self = .local
            case "confirmed": self = .confirmed(peers: peers, required: required)
            case "unconfirmed": self = .unconfirmed(peers: peers, required: required)
            case "failed": self = .failed(object.string("message") ?? "unknown")
            case "refused": self = .refused(object.string("message") ?? "a peer device")
            default: throw CommandError(.general, "the hearth process that holds the store sent a malformed reply")
            }
        }
    }

    func validate() throws {
        guard wait >= 0, wait <= 3600 else { throw ValidationError("--wait must be 0 to 3600 seconds") }
        guard minimumPeers >= 1 else { throw ValidationError("--min-peers must be at least 1") }
    }

    /// Waits until at least `minimumPeers` connected peer devices have confirmed having every
    /// change of the store (and it is on disk either way); reports how many did, or that a
    /// peer refused `key`'s write (most often: this device's clock is hours ahead).
    static func deliver(_ store: UbiquitousKeyValueStore, key: String, wait: Double, minimumPeers: Int) async -> Outcome {
        await store.synchronizeOffPool()
        guard store.isSyncing else { return .local }
        do {
            _ = try await store.syncPort()
        } catch {
            return .failed("\(error)")
        }
        let deadline = ContinuousClock.now + .milliseconds(Int(wait * 1000))
        while true {
            // A peer that refused a write of another key has answered for it: it counts as confirming.
            // Counted before the refusals are read: a peer's refusal arrives before its ack.
            let confirmed = store.confirmingPeerCount
            let refusals = store.syncRefusals.filter { $0.entry.key == StoreKey(key) }
            if !refusals.isEmpty {
                return .refused(refusals.map(\.description).joined(separator: "; "))
            }
            if confirmed >= minimumPeers { return .confirmed(peers: confirmed, required: minimumPeers) }
            // Checked once more after the deadline: on a busy machine it may pass while this task waits to run.
            guard ContinuousClock.now < deadline else { return .unconfirmed(peers: confirmed, required: minimumPeers) }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
