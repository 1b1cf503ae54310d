import HearthCore

/// An attached process's writes that the host has not yet saved, in sequence order, and which
/// of them have not been sent yet (the last ``unsent``). Kept under the store's lock, on the
/// path of every set: appending is O(1) with no allocation in the steady state.
///
/// Only the last write of each key matters (a later write of a key wins over the earlier ones,
/// and the host takes sequences with gaps). An app writing faster than the host saves (the
/// daemon saves every 100 ms) would otherwise queue every write until then, hundreds of
/// thousands: so a write of the key written last replaces that entry, and once the queue has
/// doubled, superseded writes leave it. Neither happens while a `synchronize()` waits, which
/// counts on every write it waits for staying here until the host saved it.
struct PendingWrites: Sendable {
    /// The writes, from ``head`` on: durable writes leave from the front by moving ``head``.
    private var buffer: [Entry] = []
    private var head = 0
    /// How many writes at the end have not been sent to the host yet.
    private(set) var unsent = 0
    /// When ``count`` reaches this, superseded writes leave (``compact()``).
    private var compactAt = PendingWrites.minimumCompaction
    private static let minimumCompaction = 1024
    /// How many `synchronize()` calls are waiting: no write may be dropped meanwhile.
    var synchronizing = 0

    var entries: ArraySlice<Entry> { buffer[head...] }
    var count: Int { buffer.count - head }
    var isEmpty: Bool { count == 0 }

    /// Adds a write; `sent` says whether it will leave with the next flush (attached) or only
    /// with the resend after the next snapshot.
    mutating func append(_ entry: Entry, attached: Bool) {
        if synchronizing == 0, count > 0, buffer[buffer.count - 1].key == entry.key {
            // The same key again (a slider, a counter): the new write takes the last one's place.
            if unsent == 0 && attached { unsent = 1 }
            buffer[buffer.count - 1] = entry
            return
        }
        buffer.append(entry)
        if attached { unsent += 1 }
        if synchronizing == 0, count >= compactAt { compact() }
    }

    /// The writes to send now, marked sent (a copy, so that the next write does not copy the queue).
    mutating func takeUnsent() -> [Entry] {
        defer { unsent = 0 }
        return Array(buffer.suffix(unsent))
    }

    /// Every write is (about to be) sent: after a snapshot, all go again.
    mutating func markAllSent() {
        unsent = 0
    }

    /// Forgets the writes `vector` covers (the host saved them), and returns them. The covered
    /// writes are a prefix (sequence order), so this costs the prefix, not the whole queue, and
    /// one vector lookup per origin rather than per write. Only writes of several origins (an
    /// account switch between them) need the full pass.
    @discardableResult
    mutating func removeDurable(_ vector: VersionVector) -> [Entry] {
        guard head < buffer.count else { return [] }
        let origin = buffer[head].origin
        let bound = vector[origin]
        let start = head
        while head < buffer.count, buffer[head].origin == origin, buffer[head].sequence <= bound { head += 1 }
        var removed = Array(buffer[start..<head])
        unsent = min(unsent, count)
        if head == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= Self.minimumCompaction && head >= buffer.count / 2 {
            buffer.removeFirst(head)
            head = 0
        }
        guard head < buffer.count, buffer[head].origin != origin || buffer[buffer.count - 1].origin != origin else { return removed }
        var current = buffer[head].origin
        var covered = vector[current]
        remove { entry in
            if entry.origin != current { current = entry.origin; covered = vector[current] }
            guard entry.sequence <= covered else { return false }
            removed.append(entry)
            return true
        }
        return removed
    }

    /// Removes the writes `shouldRemove` picks, keeping the count of unsent ones right.
    mutating func remove(where shouldRemove: (Entry) -> Bool) {
        keep { _, entry in !shouldRemove(entry) }
    }

    /// Keeps only the last write of each key; the next compaction waits until the queue has
    /// doubled again (amortized: one hash per write at most).
    private mutating func compact() {
        var seen = Set<StoreKey>(minimumCapacity: count / 2)
        var last = Array(repeating: false, count: buffer.count)
        for index in (head..<buffer.count).reversed() { last[index] = seen.insert(buffer[index].key).inserted }
        keep { index, _ in last[index] }
        compactAt = max(Self.minimumCompaction, 2 * count)
    }

    /// Keeps the writes `predicate` picks, in order, in place (the buffer keeps its capacity).
    private mutating func keep(_ predicate: (_ index: Int, _ entry: Entry) -> Bool) {
        let firstUnsent = buffer.count - unsent
        var kept = 0
        var keptUnsent = 0
        for index in head..<buffer.count where predicate(index, buffer[index]) {
            if index >= firstUnsent { keptUnsent += 1 }
            buffer[kept] = buffer[index]
            kept += 1
        }
        buffer.removeSubrange(kept...)
        head = 0
        unsent = keptUnsent
    }
}
