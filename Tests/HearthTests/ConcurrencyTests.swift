import Dispatch
import Foundation
import Hearth
import Testing

@Suite("Thread safety")
struct ConcurrencyTests {
    @Test("Many threads writing and reading at once: no crash, no lost write")
    func manyThreads() async throws {
        let t = try TemporaryStore(writeBehindDelay: .milliseconds(20))
        defer { t.cleanUp() }
        let store = t.store
        let threads = 8, writesPerThread = 120
        await onThreads(threads * 2) { worker in
            if worker < threads {
                for i in 0..<writesPerThread {
                    store.set(Int64(i), forKey: "t\(worker)-\(i)")
                    store.set(Int64(worker), forKey: "shared")
                    if i % 40 == 0 { _ = store.synchronize() }
                }
            } else {
                for _ in 0..<writesPerThread {
                    _ = store.dictionaryRepresentation.count
                    _ = store.longLong(forKey: "shared")
                    _ = store.object(forKey: "t0-0")
                }
            }
        }
        let all = store.values
        #expect(all.count == threads * writesPerThread + 1)
        for worker in 0..<threads {
            for i in 0..<writesPerThread { #expect(all["t\(worker)-\(i)"] == .integer(Int64(i))) }
        }
        #expect((0..<Int64(threads)).contains(store.longLong(forKey: "shared")))
        #expect(store.synchronize())
    }

    @Test("Local writes are visible synchronously on every thread")
    func readYourWrites() async throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        let store = t.store
        await onThreads(4) { worker in
            for i in 0..<500 {
                store.set(Int64(i), forKey: "w\(worker)")
                #expect(store.longLong(forKey: "w\(worker)") == Int64(i))
            }
        }
    }
}

/// Runs `work` for 0..<count on threads of its own at once, and waits without blocking a
/// thread of Swift's cooperative pool (two on a 2-core machine: blocking them for seconds
/// stalls every other test of the run).
func onThreads(_ count: Int, _ work: @escaping @Sendable (Int) -> Void) async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        let thread = Thread {
            DispatchQueue.concurrentPerform(iterations: count, execute: work)
            done.resume()
        }
        thread.start()
    }
}
