import ArgumentParser
import Foundation
import Hearth

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
        Creates the store on this device if it has no file yet. If hearth serve or hearth watch holds \
        the store, the write is sent to that process, which applies it and waits for peers.
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
        let (outcome, forwarded) = try await WriteRequest(key: key, value: newValue, wait: delivery.wait,
                                             minimumPeers: delivery.minimumPeers).perform(access)
        if json {
            emit("{\"key\":\(PropertyListJSON.quote(key)),\"value\":\(PropertyListJSON.string(newValue)),\(outcome.jsonFields)}")
        } else {
            emit("\(key) = \(PropertyListJSON.human(newValue))")
            note(outcome.sentence(forwarded: forwarded))
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

    enum Outcome {
        case local
        case confirmed(peers: Int)
        case unconfirmed
        case failed(String)

        var sentence: String {
            switch self {
            case .local: "saved on this device (signed out: not synced)"
            case .confirmed(let peers): "confirmed by \(peers) peer device\(peers == 1 ? "" : "s")"
            case .unconfirmed: "saved on this device; no peer confirmed it in time (it syncs when this store next runs with a peer reachable, e.g. hearth serve)"
            case .failed(let reason): "saved on this device; sync failed: \(reason)"
            }
        }

        /// ``sentence``, naming the `hearth` process that applied a forwarded write.
        func sentence(forwarded: Bool) -> String {
            sentence + (forwarded ? " (applied by the hearth process that holds the store)" : "")
        }

        /// Throws the command's error if sync failed; `done` says what happened on this device.
        func requireNoFailure(done: String) throws {
            if case .failed(let reason) = self { throw CommandError(.general, "\(done) on this device, but sync failed: \(reason)") }
        }

        var jsonFields: String {
            switch self {
            case .local: "\"synced\":false,\"peers\":0"
            case .confirmed(let peers): "\"synced\":true,\"peers\":\(peers)"
            case .unconfirmed, .failed: "\"synced\":false,\"peers\":0"
            }
        }
    }

    func validate() throws {
        guard wait >= 0, wait <= 3600 else { throw ValidationError("--wait must be 0 to 3600 seconds") }
        guard minimumPeers >= 1 else { throw ValidationError("--min-peers must be at least 1") }
    }

    /// Waits until the store's changes have reached `minimumPeers` peers (and are on disk either way).
    static func deliver(_ store: UbiquitousKeyValueStore, wait: Double, minimumPeers: Int) async -> Outcome {
        store.synchronize()
        guard store.isSyncing else { return .local }
        do {
            _ = try await store.syncPort()
        } catch {
            return .failed("\(error)")
        }
        guard wait > 0 else { return .unconfirmed }
        if await store.waitUntilSynced(peers: minimumPeers, timeout: .milliseconds(Int(wait * 1000))) {
            return .confirmed(peers: store.connectedPeerCount)
        }
        return .unconfirmed
    }
}
