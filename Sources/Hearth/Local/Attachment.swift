import Dispatch
import Foundation
import HearthCore
import Logging
import NIOCore

/// An attached process's view of the host, kept in the store's state (under its lock).
///
/// The store's `replica` is then the in-process copy readers use: ``confirmed`` (the host's
/// entries, as snapshot and changes told them) merged with ``pending`` (this process's writes
/// the host has not yet saved), by the replica's own last-writer-wins rule.
struct Attachment: Sendable {
    /// The attached side that owns this copy: how to reach the host again and, should it go,
    /// take over.
    let store: AttachedStore
    /// The connection to the host; nil while reattaching.
    var channel: (any Channel)?
    /// Whether the host's snapshot arrived on ``channel``: writes go out only after it.
    var attached = false
    /// Whether a snapshot was ever installed (the first one posts nothing: it is the open).
    var everAttached = false
    /// The host's entries, tombstones included.
    var confirmed: [StoreKey: Entry] = [:]
    /// This process's writes, in sequence order, until the host reports them durable.
    var pending = PendingWrites()
    /// Where the host's file is (its account may differ from the one this process started with).
    var location: StoreLocation
    var device = Data()
    /// Answers to synchronize requests, by request ID.
    var synchronized: [UInt64: Bool] = [:]
    var nextRequest: UInt64 = 0
    /// The store was closed: no takeover, no reattaching.
    var closed = false
    /// A thread is reattaching or taking over: a lost connection starts no second one.
    var reconnecting = false

    init(store: AttachedStore, location: StoreLocation) {
        self.store = store
        self.location = location
    }

    /// A flush task is queued: the next writes join its batch. The flush (on the connection's
    /// event loop, ``AttachedStore/flushOutbox()``) sends the unsent writes together and in
    /// order: a burst of sets costs one wake-up and one socket write, not one of each per set,
    /// and nothing is encoded under the store's lock.
    var outboxScheduled = false
    /// When the last flush ran (monotonic nanoseconds).
    var lastFlush: UInt64 = 0
    /// The shortest time between two flushes. A write after a quiet spell leaves at once; in a
    /// burst, the writes of this long go together: one wake-up of the event loop, one message,
    /// and for the host one apply, one notification and one push to peers, instead of one of
    /// each per write (the app and the daemon share the device's CPUs).
    static let flushInterval: UInt64 = 250_000

    /// Records a write of this process for the host; returns the flush to queue on the
    /// connection's event loop, at once or when the current batch is due (none if one is queued
    /// already, or while not attached: the write then goes with the resend after the next
    /// snapshot). Called under the store's lock, so that writes leave in sequence order; the
    /// caller queues the flush once out of it: the loop it wakes takes that lock first thing,
    /// and waited for the writer to let go of it (a futex wait and wake per write).
    mutating func enqueue(_ entry: Entry) -> (@Sendable () -> Void)? {
        let channel = attached ? self.channel : nil
        pending.append(entry, attached: channel != nil)
        guard let channel, !outboxScheduled else { return nil }
        outboxScheduled = true
        let now = DispatchTime.now().uptimeNanoseconds
        let next = lastFlush &+ Self.flushInterval
        let (store, delay) = (store, next > now ? next - now : 0)
        return { store.scheduleFlush(on: channel, in: delay) }
    }

    /// `entries` as write messages of at most ``LocalMessage/maximumEntries`` entries and about
    /// 1 MiB of values each (a frame holds 4 MiB; one entry alone is at most 1 MiB and its key).
    static func writeMessages(_ entries: some Sequence<Entry>) -> [LocalMessage] {
        var messages: [LocalMessage] = []
        var batch: [Entry] = []
        var bytes = 0
        for entry in entries {
            let size = entry.quotaSize + 64
            if !batch.isEmpty, batch.count == LocalMessage.maximumEntries || bytes + size > 1 << 20 {
                messages.append(.write(batch))
                batch = []
                bytes = 0
            }
            batch.append(entry)
            bytes += size
        }
        if !batch.isEmpty { messages.append(.write(batch)) }
        return messages
    }

    /// Queues `message` on the channel's event loop. Always queued, never written inline, even on
    /// that loop: callers hold the store's lock (so that messages leave in the order they were
    /// made), and an inline write that fails would close the channel and run its handlers, which
    /// take that lock, on this very thread.
    static func send(_ message: LocalMessage, on channel: any Channel, logger: Logger) {
        let buffer: ByteBuffer
        do {
            buffer = ByteBuffer(bytes: try message.encoded())
        } catch {
            // Never expected (entries are checked against StoreLimits first); the write stays
            // pending and goes again after a reattach.
            logger.error("cannot encode a message for the host: \(error)")
            channel.eventLoop.execute { channel.close(promise: nil) }
            return
        }
        channel.eventLoop.execute { channel.writeAndFlush(buffer, promise: nil) }
    }

    /// Merges entries the host holds into ``confirmed`` by last-writer-wins: changes it sent,
    /// and this process's own writes once durable (the host sends a writer no change of its own:
    /// they enter ``confirmed`` here, so that a copy rebuilt from it keeps them).
    mutating func confirm(_ entries: some Sequence<Entry>) {
        for entry in entries where confirmed[entry.key].map({ entry.wins(over: $0) }) ?? true {
            confirmed[entry.key] = entry
        }
    }

    /// The in-process copy: the host's entries with this process's pending writes merged in,
    /// keeping `previous`'s origin, clock and sequence (or `origin` when given).
    func view(from previous: Replica, origin: ReplicaID? = nil) -> Replica {
        var entries = confirmed
        for entry in pending.entries where entries[entry.key].map({ entry.wins(over: $0) }) ?? true {
            entries[entry.key] = entry
        }
        let id = origin ?? previous.id
        return Replica(id: id, clock: previous.clock, sequence: id == previous.id ? previous.sequence : 0,
                       vector: VersionVector(), entries: entries)
    }
}
