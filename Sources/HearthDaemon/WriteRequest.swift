import Foundation
import Hearth

/// One `set` or `rm`: applied to the store directly, or, when `serve` or `watch` holds the
/// store, sent to that process through its control socket and applied there.
///
/// A forwarded write carries a random ID; the holder remembers recent IDs and their outcome
/// (``RecentRequests``), so asking again never applies a write twice in one holder. If the
/// holder goes away without answering, the write may or may not have landed: the client then
/// resolves it itself (``perform(_:)``) and only says so if it cannot.
package struct WriteRequest: Sendable {
    package var id = UUID()
    package var store: String
    package var key: String
    /// The new value; nil removes the key.
    package var value: PropertyListValue?
    package var wait: Double
    package var minimumPeers: Int
    /// This write may already have been handed to a holder that stopped answering: the value
    /// already in place (or the key already gone, for a removal) counts as done, not as
    /// "no such key", and is not written again.
    package var isRetry = false

    /// How long a client keeps trying past its --wait to resolve a write, or to get a store
    /// that another hearth command holds for a moment.
    package static let grace = Duration.seconds(5)

    /// Which process applied the write.
    package enum Route: Sendable, Equatable {
        /// This one.
        case here
        /// The hearth process that holds the store.
        case holder
        /// This one, after the holder it was first sent to stopped without answering.
        case resolvedHere
        /// The process that holds the store now, after the first one stopped without answering.
        case resolvedByNewHolder

        /// Appended to the outcome's sentence.
        package var remark: String {
            switch self {
            case .here: ""
            case .holder: " (applied by the hearth process that holds the store)"
            case .resolvedHere: " (the hearth process it was sent to stopped before answering; applied here)"
            case .resolvedByNewHolder: " (the hearth process it was sent to stopped before answering; applied by the one holding the store now)"
            }
        }
    }

    package init(store: String, key: String, value: PropertyListValue?, wait: Double, minimumPeers: Int) {
        self.store = store
        self.key = key
        self.value = value
        self.wait = wait
        self.minimumPeers = minimumPeers
    }

    /// Applies the write here or through the holder, and waits for peers as asked; throws the
    /// command's errors. Status 6 (storeLocked) only when nothing was sent to any holder;
    /// ``CommandError/Status/outcomeUnknown`` when something was and the outcome could not be
    /// found out within --wait plus ``grace``.
    package func perform(_ access: StoreAccess) async throws -> (outcome: WriteOutcome, route: Route) {
        try checkSize()
        let deadline = ContinuousClock.now + .milliseconds(Int(wait * 1000)) + Self.grace
        var request = self
        var handedOver = false
        var lastHolder: StoreHolder?
        // Made before the first wait (and a try made after it): see ``HolderWatch``.
        var watch: HolderWatch?
        var noReply = false
        while true {
            let timeout = max(deadline - ContinuousClock.now, .seconds(1))
            // Opened here: sync starts once the write is made, so the first hello carries it
            // (a peer's first sync with this device then includes it, as the peer expects).
            switch try await access.reach(asking: ControlRequest.write(request).line, timeout: timeout, syncPaused: true,
                                          lockHeld: watch?.lockIsHeld == true) {
            case .opened(let store):
                let outcome: WriteOutcome
                do {
                    outcome = try await request.apply(to: store, startingSync: true)
                } catch {
                    await store.internals.close()
                    throw error
                }
                await store.internals.close()
                return (outcome, handedOver ? .resolvedHere : .here)
            case .answered(let reply):
                return (try Self.outcome(fromReply: reply), handedOver ? .resolvedByNewHolder : .holder)
            case .noReply:
                // Ask again (the same ID: a holder that has it answers with its outcome), or
                // apply it here once the store is free.
                handedOver = true
                request.isRetry = true
                noReply = true
            case .held(let holder, let error):
                if !handedOver && !holder.mayLetGoSoon { throw error }
                lastHolder = holder
                noReply = false
            }
            // A cancelled task gives up as at the deadline (its waits would end at once).
            guard ContinuousClock.now < deadline, !Task.isCancelled else {
                if handedOver {
                    throw CommandError(.outcomeUnknown, "outcome unknown: the write may or may not have been applied (the hearth process it "
                                       + "was sent to stopped before answering, and store \(store) did not become free in time); "
                                       + "check with hearth get")
                }
                throw CommandError(.storeLocked, "store \(store) is open in \(lastHolder?.description ?? "another process"), "
                                   + "which took no writes within \(Self.seconds(.milliseconds(Int(wait * 1000)) + Self.grace)) s; nothing was written")
            }
            guard let watch else {
                watch = access.holderWatch()
                continue
            }
            // Until the holder lets go or exits, or a holder's socket appears (no period). A
            // holder that dropped the request but lives on (at its connection limit, say) says
            // nothing when it can take one again: asked again within a quarter second.
            await watch.wait(until: noReply ? min(deadline, .now + .milliseconds(250)) : deadline)
        }
    }

    private static func seconds(_ duration: Duration) -> String {
        String(format: "%.0f", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    /// Refuses here what the store would refuse for its size, before anything is sent (and so
    /// every request line stays within ``ControlSocket/maximumLineBytes``).
    package func checkSize() throws {
        guard let value else { return }
        let size = key.utf8.count + value.canonicalSize
        guard size <= StoreLimits.maximumValueSize else {
            throw CommandError(.invalidValue, "key and value take \(size) bytes; the per-value limit is \(StoreLimits.maximumValueSize) (key \(key))")
        }
    }

    /// Writes to an open store and waits for peers (in this process, or in the holder for a
    /// forwarded request).
    /// `startingSync`: the store was opened with sync paused; start it once the write is made.
    package func apply(to store: UbiquitousKeyValueStore, startingSync: Bool = false) async throws -> WriteOutcome {
        let current = store.value(forKey: key)
        if value == nil, current == nil {
            guard isRetry else { throw CommandError(.notFound, "no value for \(key) in store \(store.storeIdentifier)") }
        } else if !(isRetry && current == value) {
            do {
                try store.setValue(value, forKey: key)
            } catch {
                throw commandError(error, key: key)
            }
        }
        if startingSync { store.resumeSync() }
        return await WriteOutcome.deliver(store, key: key, wait: wait, minimumPeers: minimumPeers)
    }

    // MARK: The wire form (see ControlRequest)

    package var fields: JSONObject {
        var object = JSONObject(["op": .string(value == nil ? "rm" : "set"), "id": .string(id.uuidString), "store": .string(store),
                                 "key": .string(key), "wait": .double(wait), "minPeers": .integer(Int64(minimumPeers))])
        if let value { object["value"] = value }
        if isRetry { object["retry"] = .bool(true) }
        return object
    }

    package init(_ object: JSONObject) throws(CommandError) {
        guard let store = object.string("store"), let key = object.string("key") else {
            throw CommandError(.usage, "malformed request: no store or key")
        }
        guard let idText = object.string("id"), let id = UUID(uuidString: idText) else {
            throw CommandError(.usage, "malformed request: no request id")
        }
        let value = object["value"]
        guard (object.string("op") == "rm") == (value == nil) else {
            throw CommandError(.usage, "malformed request: set needs a value, rm takes none")
        }
        self.id = id
        self.store = store
        self.key = key
        self.value = value
        wait = min(max(object.double("wait") ?? 5, 0), 3600)
        minimumPeers = Int(min(max(object.integer("minPeers") ?? 1, 1), 1024))
        isRetry = object.bool("retry") ?? false
    }

    /// The holder's answer to this request; `note` hears what was done.
    package func answer(store: UbiquitousKeyValueStore, note: @Sendable (String) -> Void) async -> String {
        do {
            let outcome = try await apply(to: store)
            note("\(value == nil ? "removed" : "set") \(key) for another hearth process; \(outcome.sentence)")
            var object = outcome.replyFields
            object["status"] = .integer(0)
            return object.line
        } catch let error as CommandError {
            return ControlRequest.reply(error)
        } catch {
            return ControlRequest.reply(CommandError(.general, "\(error)"))
        }
    }

    package static func outcome(fromReply reply: String) throws -> WriteOutcome {
        try WriteOutcome(replyFields: ControlRequest.fields(ofReply: reply))
    }
}
