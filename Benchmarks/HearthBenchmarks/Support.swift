import Foundation
import Synchronization

// Clocks, process accounting, statistics and line I/O shared by the parent and its children.

/// CLOCK_MONOTONIC in nanoseconds. System-wide on Linux, so a timestamp taken in one process
/// can be compared with one taken in another (the propagation latency depends on it).
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// User + system CPU time of this process, in microseconds (getrusage).
func cpuMicroseconds() -> Int64 {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    let user = Int64(usage.ru_utime.tv_sec) * 1_000_000 + Int64(usage.ru_utime.tv_usec)
    let system = Int64(usage.ru_stime.tv_sec) * 1_000_000 + Int64(usage.ru_stime.tv_usec)
    return user + system
}

/// User + system CPU time of process `pid` so far, in microseconds (/proc/<pid>/stat's utime
/// and stime, in clock ticks: 10 ms each, so measure over a second or more); -1 if unreadable.
func cpuMicroseconds(pid: pid_t) -> Int64 {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = text.lastIndex(of: ")") else { return -1 }
    // After "pid (comm)": field 3 (state) is index 0, utime (14) index 11, stime (15) index 12.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Int64(fields[11]), let system = Int64(fields[12]) else { return -1 }
    return (user + system) * 1_000_000 / Int64(sysconf(Int32(_SC_CLK_TCK)))
}

/// Context switches of this process (voluntary, involuntary): how often it woke up.
func contextSwitches() -> (voluntary: Int, involuntary: Int) {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return (usage.ru_nvcsw, usage.ru_nivcsw)
}

/// A field of /proc/<pid>/status in kB (VmRSS, VmHWM), or -1.
func procStatus(_ field: String, pid: String = "self") -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return -1 }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        let digits = line.dropFirst(field.count + 1).filter(\.isNumber)
        return Int(digits) ?? -1
    }
    return -1
}

/// Percentiles and extremes of a sample, in the sample's unit.
struct Summary: Sendable {
    let count: Int
    let p50: Double
    let p90: Double
    let p99: Double
    let max: Double
    let mean: Double

    init(_ samples: [Double]) {
        let sorted = samples.sorted()
        count = sorted.count
        func at(_ q: Double) -> Double {
            guard !sorted.isEmpty else { return .nan }
            // Nearest-rank: the smallest value with at least q of the sample at or below it.
            let rank = Int((q * Double(sorted.count)).rounded(.up))
            return sorted[Swift.max(0, Swift.min(sorted.count - 1, rank - 1))]
        }
        p50 = at(0.50)
        p90 = at(0.90)
        p99 = at(0.99)
        max = sorted.last ?? .nan
        mean = sorted.isEmpty ? .nan : sorted.reduce(0, +) / Double(sorted.count)
    }
}

func median(_ values: [Double]) -> Double { Summary(values).p50 }

/// Writes whole lines to a file descriptor; a line under PIPE_BUF reaches a pipe in one
/// piece, and the lock keeps lines from several threads of this process apart.
final class LineWriter: Sendable {
    private let fd: Int32
    private let lock = Mutex(())
    init(fd: Int32) { self.fd = fd }

    func send(_ line: String) {
        lock.withLock { _ in
            var bytes = Array((line + "\n").utf8)
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
                if n < 0 { if errno == EINTR { continue }; return }
                offset += n
            }
            bytes.removeAll()
        }
    }
}

/// Reads lines from a file descriptor, with a timeout (poll), for the parent's dialogue
/// with its children. Used from one thread at a time.
final class LineReader: @unchecked Sendable {
    // @unchecked: the buffer is touched only by the single thread that reads this child.
    private let fd: Int32
    private var buffer: [UInt8] = []

    init(fd: Int32) { self.fd = fd }

    enum ReadError: Error, CustomStringConvertible {
        case timeout(String), closed(String)
        var description: String {
            switch self {
            case .timeout(let who): "timed out waiting for \(who)"
            case .closed(let who): "\(who) closed its output"
            }
        }
    }

    func readLine(timeout: Double, who: String) throws -> String {
        let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let now = monotonicNanoseconds()
            guard now < deadline else { throw ReadError.timeout(who) }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            // One wait for the whole time left: an idle child must not wake once a second (its
            // idle wake-ups are measured). A parent that dies closes the pipe, which wakes it.
            let ready = poll(&pfd, 1, Int32(min(UInt64(Int32.max), (deadline - now) / 1_000_000 + 1)))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw ReadError.closed(who) }
            buffer.append(contentsOf: chunk[..<n])
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
