#if canImport(Glibc)
import Glibc

/// One event read from an inotify descriptor: the watch it came from, what happened
/// (`IN_*` bits), and the name of the file in a watched folder (empty for the folder itself,
/// or a watched file).
package struct InotifyEvent: Sendable {
    package let watch: Int32
    package let mask: UInt32
    package let name: String

    /// The events in the first `count` bytes of `buffer`, as `read(2)` on an inotify
    /// descriptor returned them (each a `struct inotify_event` and its padded name).
    package static func parse(_ buffer: [UInt8], count: Int) -> [InotifyEvent] {
        var events: [InotifyEvent] = []
        var offset = 0
        let header = MemoryLayout<inotify_event>.size
        while offset + header <= count {
            let (watch, mask, length) = buffer.withUnsafeBytes { raw in
                (raw.loadUnaligned(fromByteOffset: offset, as: Int32.self),
                 raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                 Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)))
            }
            let start = offset + header
            let name = String(decoding: buffer[start..<min(start + length, count)].prefix { $0 != 0 }, as: UTF8.self)
            offset = start + length
            events.append(InotifyEvent(watch: watch, mask: mask, name: name))
        }
        return events
    }
}
#endif

#if canImport(Glibc)
/// A pipe that wakes a thread asleep in `poll(2)`: the thread polls `read`, another writes a
/// byte to `write`.
package enum WakePipe {
    /// Both ends close-on-exec and non-blocking; (-1, -1) if no pipe could be made.
    package static func make() -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        // pipe2 is not imported (_GNU_SOURCE); the flags are set after.
        guard pipe(&ends) == 0 else { return (-1, -1) }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        return (ends[0], ends[1])
    }
}
#endif
