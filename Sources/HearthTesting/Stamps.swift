import Hearth
import HearthCore

extension UbiquitousKeyValueStore {
    /// Returns once the wall clock is past the millisecond this store stamped its entry for
    /// `key` with (value or tombstone): a write made after that, on a device of this process
    /// whose clock is not skewed, is stamped later and wins by its timestamp, not by the
    /// origins' tie-break of two writes in one millisecond. It waits for that one clock tick,
    /// at most a millisecond, yielding meanwhile: no sleep that guesses how long is enough.
    ///
    /// ```swift
    /// c.set("C's stale edit", forKey: "x")
    /// await c.pastStamp(of: "x")
    /// a.removeObject(forKey: "x")            // later than C's edit, on every run
    /// ```
    public func pastStamp(of key: String) async {
        guard let stamp = internals.replica.entries[StoreKey(key)]?.timestamp else {
            preconditionFailure("pastStamp(of:): this store holds no entry for \(key)")
        }
        while HybridLogicalClock.wallMilliseconds() <= stamp.milliseconds { await Task.yield() }
    }
}
