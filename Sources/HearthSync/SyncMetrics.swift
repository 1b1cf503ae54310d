import Foundation
import HearthCore

/// What a device's sync engine has sent and received since it started, for apps
/// (`UbiquitousKeyValueStore.syncMetrics`), `hearth status` and the benchmarks.
public struct SyncCounters: Sendable, Equatable {
    /// Bytes of frames sent, including the 4-byte length prefix (TLS overhead not included).
    public var bytesSent = 0
    /// Bytes of frames received, including the 4-byte length prefix.
    public var bytesReceived = 0
    /// Entries sent to peers (each copy counts: one entry sent to two peers is two).
    public var entriesSent = 0
    /// Entries received from peers, applied or not.
    public var entriesReceived = 0
    /// Entries this device signed: its local writes, each signed once, however many peers it
    /// sends them to (a write replaced before it was signed is never signed).
    public var entriesSigned = 0
    /// Sessions that passed the hello (two devices dialling each other at once may both
    /// get this far before one connection is dropped).
    public var sessions = 0
    /// Frames of one message type sent: how many, and their bytes (length prefix included).
    public struct Tally: Sendable, Equatable {
        /// Frame bytes, including each frame's 4-byte length prefix.
        public var bytes = 0
        /// Frames.
        public var messages = 0
    }

    /// Frames sent by message type ("hello", "delta", "ack", …): where the bytes of a
    /// reconnection go.
    public var sentByType: [String: Tally] = [:]
    /// Frames received by message type, as ``sentByType`` counts those sent (frames that do
    /// not decode count in ``bytesReceived`` only).
    public var receivedByType: [String: Tally] = [:]
    /// When entries last went to or came from a peer (wall clock), nil if they never did.
    /// Kept here so that "last exchange" needs no one polling the counters.
    public var lastEntriesMoved: Date?

    /// No traffic yet.
    public init() {}
}

/// The engine's counters, behind a lock.
package final class SyncMetrics: Sendable {
    package typealias Snapshot = SyncCounters

    private let counters = Locked(Snapshot())
    /// Deltas encoded (``SyncStore/payload(of:sender:)``): with ``SyncCounters/sentByType``'s
    /// deltas, how many links shared one encoding. Not in the public counters.
    private let encodedDeltas = Locked(0)
    /// For ``SyncCounters/lastEntriesMoved``: the engine's wall clock.
    private let clock: SyncClock

    package init(clock: SyncClock = .system) { self.clock = clock }

    package var snapshot: Snapshot { counters.withLock { $0 } }

    func sent(bytes: Int, type: String) {
        counters.withLock {
            $0.bytesSent += bytes
            $0.sentByType[type, default: Snapshot.Tally()].bytes += bytes
            $0.sentByType[type, default: Snapshot.Tally()].messages += 1
        }
    }
    func received(bytes: Int) { counters.withLock { $0.bytesReceived += bytes } }
    /// A frame of `bytes` (already counted by ``received(bytes:)``) decoded as a `type` message.
    func received(_ type: String, bytes: Int) {
        counters.withLock {
            $0.receivedByType[type, default: Snapshot.Tally()].bytes += bytes
            $0.receivedByType[type, default: Snapshot.Tally()].messages += 1
        }
    }
    func sentEntries(_ n: Int) { moved(n) { $0.entriesSent += n } }
    func receivedEntries(_ n: Int) { moved(n) { $0.entriesReceived += n } }

    private func moved(_ n: Int, _ count: (inout Snapshot) -> Void) {
        guard n > 0 else { return }
        let now = clock.date
        counters.withLock {
            count(&$0)
            $0.lastEntriesMoved = now
        }
    }
    func signedEntries(_ n: Int) { counters.withLock { $0.entriesSigned += n } }
    func deltaEncoded() { encodedDeltas.withLock { $0 += 1 } }
    /// Deltas encoded since the engine started (several links may send one encoding).
    package var deltasEncoded: Int { encodedDeltas.withLock { $0 } }
    func sessionStarted() { counters.withLock { $0.sessions += 1 } }
}
