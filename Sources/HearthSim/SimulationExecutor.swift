@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
import Foundation
import HearthCore

/// The whole household's scheduler: every job of every task in this process runs here, on the
/// one thread that calls ``run(until:)``, in an order the seed decides, on a virtual clock.
///
/// It is installed as the process's default executor (Swift 6.3's `ExecutorFactory`,
/// ``SimulationExecutors``) before any task exists, so an unstructured `Task {}` (the engine's
/// heartbeat, diallers, acceptor; a session's delayed vector), a `Task.detached`, a child task,
/// a default actor and `globalConcurrentExecutor` (where the engine sends signing batches) all
/// land here; a task executor preference would not catch `Task {}` (SE-0417: unstructured tasks
/// do not inherit it). Time is virtual: ``sleep(for:)`` (the engines' `SyncClock.sleep`) and any
/// `Task.sleep` (through `SchedulingExecutor`) wait for the run loop to reach their deadline,
/// which it jumps to as soon as nothing is ready to run, so an idle simulated hour costs only the
/// timers it holds.
///
/// What still runs elsewhere is counted, not hidden: a job enqueued from another thread (a
/// `DispatchQueue`, a NIO event loop resuming a continuation) is ``foreignEnqueues``, and a run
/// with any is not deterministic (the summary says so).
final class SimulationExecutor: MainExecutor, TaskExecutor, SchedulingExecutor, @unchecked Sendable {
    // Only `enqueue` may be called from another thread (then counted as foreign); everything
    // else is the simulation thread's, under the lock so that even a foreign caller is safe.
    private struct State {
        var ready: [UnownedJob] = []
        var timers = TimerHeap()
        var now: Duration = .zero
        var random = SplitMix64(seed: 0)
        var sleepers: [UInt64: Sleeper] = [:]
        var nextID: UInt64 = 0
        var jobsRun = 0
        var foreignEnqueues = 0
        var strayTimers = 0
        var stopped = false
    }

    private enum Sleeper {
        case waiting(CheckedContinuation<Void, any Error>)
        case cancelledEarly
    }

    private let state = Locked(State())
    /// The thread ``run(until:)`` runs on (the process's main thread).
    private let owner = pthread_self()

    /// Clears the clock, the queues and the counters, and seeds the order of jobs: between two
    /// seeds, once the previous run has ended.
    func reset(seed: UInt64) {
        state.withLock { s in
            precondition(s.ready.isEmpty && s.sleepers.isEmpty, "a run left work behind")
            s = State()
            s.random = SplitMix64(seed: seed ^ 0x5EED_0F_5C4E_D01E)
        }
    }

    /// Virtual time since the run began.
    var now: Duration { state.withLock { $0.now } }
    /// Jobs run since ``reset(seed:)``.
    var jobsRun: Int { state.withLock { $0.jobsRun } }
    /// Jobs enqueued from a thread other than the simulation's (the run is then not deterministic).
    var foreignEnqueues: Int { state.withLock { $0.foreignEnqueues } }
    /// `Task.sleep` calls (timers not made by ``sleep(for:)``): their deadlines are virtual, but
    /// measured from the real clock, so rounded to the millisecond.
    var strayTimers: Int { state.withLock { $0.strayTimers } }

    // MARK: Executor

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let foreign = pthread_equal(pthread_self(), owner) == 0
        state.withLock { s in
            if foreign { s.foreignEnqueues += 1 }
            s.ready.append(unowned)
        }
    }

    func enqueue<C: Clock>(_ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C) {
        schedule(UnownedJob(job), after: Self.virtual(delay))
    }

    func enqueue<C: Clock>(_ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C) {
        schedule(UnownedJob(job), after: Self.virtual(clock.now.duration(to: instant)))
    }

    private func schedule(_ job: UnownedJob, after delay: Duration) {
        state.withLock { s in
            s.strayTimers += 1
            s.nextID += 1
            s.timers.push(.init(deadline: s.now + delay, id: s.nextID, action: .job(job)))
        }
    }

    /// A `Task.sleep`'s delay as virtual time: a real-clock duration, rounded to whole
    /// milliseconds so that the microseconds spent computing it do not change the order of
    /// timers from one run to the next.
    private static func virtual<D: DurationProtocol>(_ delay: D) -> Duration {
        guard let delay = delay as? Duration else { return .zero }
        let milliseconds = (Double(delay.components.seconds) * 1000 + Double(delay.components.attoseconds) / 1e15).rounded()
        return .milliseconds(max(0, Int64(milliseconds)))
    }

    func run() throws { run(until: { false }) }
    func stop() { state.withLock { $0.stopped = true } }
    func checkIsolated() {}
    var isMainExecutor: Bool { pthread_equal(pthread_self(), owner) != 0 }

    // MARK: Virtual time

    /// Suspends the calling task for `duration` of virtual time; throws `CancellationError`
    /// at once when the task is cancelled (as `Task.sleep` does).
    func sleep(for duration: Duration) async throws {
        let id = state.withLock { s in s.nextID += 1; return s.nextID }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow = state.withLock { s -> Bool in
                    if case .cancelledEarly = s.sleepers[id] {
                        s.sleepers[id] = nil
                        return true
                    }
                    s.sleepers[id] = .waiting(continuation)
                    s.timers.push(.init(deadline: s.now + max(duration, .zero), id: id, action: .wake(id)))
                    return false
                }
                if resumeNow { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let waiting = state.withLock { s -> CheckedContinuation<Void, any Error>? in
                guard case .waiting(let continuation) = s.sleepers[id] else {
                    s.sleepers[id] = .cancelledEarly
                    return nil
                }
                s.sleepers[id] = nil
                return continuation
            }
            waiting?.resume(throwing: CancellationError())
        }
    }

    /// Runs `action` on the simulation thread at `now + delay` of virtual time (the workload's
    /// and the faults' own timers).
    func after(_ delay: Duration, _ action: @escaping @Sendable () -> Void) {
        state.withLock { s in
            s.nextID += 1
            s.timers.push(.init(deadline: s.now + max(delay, .zero), id: s.nextID, action: .call(action)))
        }
    }

    // MARK: The run loop

    /// Runs jobs, one at a time in an order drawn from the seed, and fires timers in deadline
    /// order (virtual time jumps to the next one when no job is ready), until `done` holds or
    /// there is nothing left to do. Returns whether `done` held.
    @discardableResult
    func run(until done: () -> Bool) -> Bool {
        while !done() {
            switch nextStep() {
            case .job(let job):
                job.runSynchronously(on: asUnownedTaskExecutor())
            case .call(let action):
                action()
            case .wake(let continuation):
                continuation.resume()
            case nil:
                return done()
            }
        }
        return true
    }

    private enum Step {
        case job(UnownedJob)
        case call(@Sendable () -> Void)
        case wake(CheckedContinuation<Void, any Error>)
    }

    private func nextStep() -> Step? {
        state.withLock { s -> Step? in
            if s.stopped { return nil }
            if !s.ready.isEmpty {
                // Any ready job may run next, as on a pool of threads: the seed picks which.
                let index = Int(s.random.next() % UInt64(s.ready.count))
                s.ready.swapAt(index, s.ready.count - 1)
                s.jobsRun += 1
                return .job(s.ready.removeLast())
            }
            while let timer = s.timers.pop() {
                s.now = max(s.now, timer.deadline)
                switch timer.action {
                case .job(let job):
                    s.jobsRun += 1
                    return .job(job)
                case .call(let action):
                    return .call(action)
                case .wake(let id):
                    // A sleeper cancelled meanwhile was resumed by its cancellation.
                    guard case .waiting(let continuation) = s.sleepers.removeValue(forKey: id) else { continue }
                    return .wake(continuation)
                }
            }
            return nil
        }
    }

    /// Ends a run: every sleeper still waiting is cancelled, and what that wakes runs, until
    /// nothing is ready; the timers left (other than sleepers') are dropped.
    func drain() {
        for _ in 0..<100 {
            let sleepers = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
                defer { s.sleepers = [:] }
                return s.sleepers.values.compactMap { if case .waiting(let c) = $0 { c } else { nil } }
            }
            for continuation in sleepers { continuation.resume(throwing: CancellationError()) }
            while let job = state.withLock({ $0.ready.popLast() }) { job.runSynchronously(on: asUnownedTaskExecutor()) }
            if state.withLock({ $0.sleepers.isEmpty && $0.ready.isEmpty }) { break }
        }
        state.withLock { s in
            s.timers = TimerHeap()
            s.sleepers = [:]
        }
    }
}

/// The executors this process runs on: the simulation's, for the main actor and every task.
struct SimulationExecutors: ExecutorFactory {
    static let shared = SimulationExecutor()
    static var mainExecutor: any MainExecutor { shared }
    static var defaultExecutor: any TaskExecutor { shared }

    /// Installs the simulation's executor as the process's: before any task is made.
    static func install() {
        _createExecutors(factory: SimulationExecutors.self)
    }
}

/// Timers by (deadline, id): the earliest first, and of two at one instant the one made first.
struct TimerHeap {
    enum Action {
        case job(UnownedJob)
        case call(@Sendable () -> Void)
        case wake(UInt64)
    }

    struct Timer {
        let deadline: Duration
        let id: UInt64
        let action: Action

        func precedes(_ other: Timer) -> Bool { (deadline, id) < (other.deadline, other.id) }
    }

    private var heap: [Timer] = []

    var isEmpty: Bool { heap.isEmpty }

    mutating func push(_ timer: Timer) {
        heap.append(timer)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Timer? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let first = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].precedes(heap[smallest]) { smallest = left }
            if right < heap.count, heap[right].precedes(heap[smallest]) { smallest = right }
            guard smallest != parent else { return first }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}

/// SplitMix64: the simulator's seeded generator (each stream its own).
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
