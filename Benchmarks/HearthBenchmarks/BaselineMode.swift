import Dispatch
import Foundation

/// `hearth-benchmarks baseline`: a Swift process that has started Swift concurrency and
/// Dispatch, as every Hearth process has, and then does nothing: its idle wake-ups are the
/// runtime's own (on Linux, libdispatch's thread-pool monitor ticks once a second), the floor
/// an idle Hearth device is measured against. Answers `rusage` and `quit` on stdin.
enum BaselineMode {
    static func run() async {
        // Bring up what a Hearth process runs on: a task on the cooperative pool, a global queue.
        await Task.detached { await Task.yield() }.value
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { done.resume() }
        }
        let out = LineWriter(fd: 1)
        let reader = LineReader(fd: 0)
        out.send("READY")
        await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
            Thread {
                while let line = try? reader.readLine(timeout: 86_400, who: "parent") {
                    if line == "quit" { break }
                    if line == "rusage" {
                        let switches = contextSwitches()
                        out.send("R \(cpuMicroseconds()) \(switches.voluntary) \(switches.involuntary) \(monotonicNanoseconds())")
                    }
                }
                finished.resume()
            }.start()
        }
    }
}
