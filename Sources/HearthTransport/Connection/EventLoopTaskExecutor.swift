import NIOCore

/// Runs the jobs of the tasks that prefer it on one NIO event loop.
///
/// A connection's tasks (its reader and writer) run where its bytes are: a frame the event
/// loop has just decrypted resumes the reader on the same thread, and what the writer hands
/// the channel is written without another wake-up. On the cooperative pool each of these was a
/// hand-off between threads (a futex wake, tens of microseconds on a virtual machine), twice
/// per change on a 2-peer path whose floor is about 0.2 ms.
///
/// The work that then runs on the loop is short and never blocks (no file I/O, no waits):
/// decoding, one signature or verification per entry, the session's state. Bigger batches of
/// signatures go to the global executor (`SyncStore`), so that one loop keeps serving its
/// other connections.
///
/// ```swift
/// try await withTaskExecutorPreference(EventLoopTaskExecutor(channel.eventLoop)) {
///     for try await frame in inbound { … }
/// }
/// ```
package final class EventLoopTaskExecutor: TaskExecutor {
    package let eventLoop: any EventLoop

    package init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // On the loop's own thread `execute` only queues the job for this turn of the loop.
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
