import Dispatch
import Foundation
import HearthCore
import HearthTransport
import Logging
import NIOCore

/// One pairing connection once TLS is up: a writer of messages, and the messages read, as a
/// stream that a timeout, a refusal or the deadline can end with an error at any moment.
///
/// The frames are read by a task of their own (``run(_:_:)`` starts it), so that one side can
/// learn of the other's refusal while it waits for its person, and so that a timeout ends the
/// wait without touching the reader.
final class PairingLink: Sendable {
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private let continuation: AsyncThrowingStream<PairingMessage, any Error>.Continuation
    let messages: AsyncThrowingStream<PairingMessage, any Error>
    private let ending = Locked<PairingError?>(nil)
    private let peerRefusal = Locked<String?>(nil)
    /// Set when the reader has seen the connection end (the other side closed, or it failed).
    private let readerEnded = Locked(false)
    /// Signalled once ``readerEnded`` is set: what ``refuse(_:ending:)`` waits on.
    private let readerEnd = ChangeSignal()
    private let onInterrupt = Locked<[@Sendable () -> Void]>([])
    let logger: Logger

    private init(outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, logger: Logger) {
        self.outbound = outbound
        self.logger = logger
        (messages, continuation) = AsyncThrowingStream.makeStream(of: PairingMessage.self)
    }

    /// Runs `body` on `connection` with a link whose messages a reader task fills, then closes.
    static func run<T: Sendable>(_ connection: PeerConnection, logger: Logger,
                                 _ body: @escaping @Sendable (PairingLink) async throws -> T) async throws -> T {
        try await connection.executeThenClose { inbound, outbound in
            let link = PairingLink(outbound: outbound, logger: logger)
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask {
                    await link.pump(inbound)
                    return nil
                }
                defer { group.cancelAll() }
                let result = try await body(link)
                link.interrupt(PairingError(code: .connectionLost, message: "the pairing is over"))
                return result
            }
        }
    }

    /// Reads frames into ``messages`` until the connection ends, a frame is malformed, the other
    /// side refuses or the link is interrupted.
    private func pump(_ inbound: NIOAsyncChannelInboundStream<ByteBuffer>) async {
        defer {
            readerEnded.withLock { $0 = true }
            readerEnd.signal()
        }
        do {
            for try await frame in inbound {
                let message = try PairingMessage.decode(frame.readableData)
                continuation.yield(message)
                if case .refused(let reason) = message {
                    // Nothing follows a refusal; a person still deciding here need not go on.
                    // The reader gets the message first, then this.
                    peerRefusal.withLock { $0 = $0 ?? reason }
                    interrupt(PairingError(code: .refusedByPeer, message: reason))
                }
            }
            interrupt(PairingError(code: .connectionLost, message: "the other device closed the connection"))
        } catch let error as PairingError {
            interrupt(error)
        } catch {
            interrupt(PairingError(code: .connectionLost, message: "the connection failed: \(error)"))
        }
    }

    /// Ends the wait for messages with `error` (a timeout, a refusal, the connection's end)
    /// after those already read; runs the interrupt handlers once. The first reason wins: a
    /// timeout stays a timeout even though the connection then closes.
    func interrupt(_ error: PairingError) {
        let first = ending.withLock { e -> Bool in
            guard e == nil else { return false }
            e = error
            return true
        }
        continuation.finish(throwing: ending.withLock { $0! })
        guard first else { return }
        for handler in onInterrupt.withLock({ h in defer { h = [] }; return h }) { handler() }
    }

    /// The decision of `person` (a task asking a person), or nil when the link ends first (the
    /// other side refused or went away, a timeout): then the task is cancelled and not waited
    /// for, so a person who never answers cannot hold the pairing.
    func decision(of person: Task<PairingDecision, Never>) async -> PairingDecision? {
        let waiting = Locked<CheckedContinuation<PairingDecision?, Never>?>(nil)
        let finish: @Sendable (PairingDecision?) -> Void = { value in
            waiting.withLock { c in defer { c = nil }; return c }?.resume(returning: value)
        }
        return await withCheckedContinuation { continuation in
            waiting.withLock { $0 = continuation }
            Task { finish(await person.value) }
            whenInterrupted {
                person.cancel()
                finish(nil)
            }
        }
    }

    /// Why the link ended, if it did.
    var endReason: PairingError? { ending.withLock { $0 } }

    /// A refusal the other side sent, even if not read yet.
    var refusalFromPeer: String? { peerRefusal.withLock { $0 } }

    /// Runs `handler` when the link is interrupted (at once if it was).
    func whenInterrupted(_ handler: @escaping @Sendable () -> Void) {
        let now = ending.withLock { e -> Bool in
            if e == nil { onInterrupt.withLock { $0.append(handler) } }
            return e != nil
        }
        if now { handler() }
    }

    func send(_ message: PairingMessage) async throws {
        let bytes = try message.encoded()
        do {
            try await outbound.write(ByteBuffer(bytes: bytes))
        } catch {
            throw endReason ?? PairingError(code: .connectionLost, message: "cannot send \(message.type): \(error)")
        }
    }

    /// Sends `pair-refused` (best effort: the other side may be gone) and ends the link with
    /// `error`; then waits, at most 2 s, for the other side to close, which it does once it has
    /// read the refusal. Closing at once could lose the refusal on a loaded machine: the other
    /// side then reported a lost connection instead of the refusal (LoopbackPairingTests,
    /// beside 4 CPU hogs).
    func refuse(_ reason: String, ending error: PairingError) async {
        try? await send(.refused(reason: reason))
        interrupt(error)
        _ = await ChangeSignal.waitUntil(ContinuousClock.now + .seconds(2), observing: { [readerEnd] }) {
            readerEnded.withLock { $0 }
        }
    }
}

/// Reads a link's messages one at a time, each within a time limit. Not Sendable: one task reads.
struct PairingReader {
    private var iterator: AsyncThrowingStream<PairingMessage, any Error>.AsyncIterator
    private let link: PairingLink

    init(_ link: PairingLink) {
        self.link = link
        iterator = link.messages.makeAsyncIterator()
    }

    /// The next message, or the error that ended the link: ``PairingError/Code/timedOut`` after
    /// `timeout` (which ends the link).
    mutating func next(within timeout: Duration, waitingFor what: String) async throws(PairingError) -> PairingMessage {
        let link = self.link
        let timer = Task {
            try await Task.sleep(for: timeout)
            link.interrupt(PairingError(code: .timedOut, message: "no \(what) within \(timeout)"))
        }
        defer { timer.cancel() }
        do {
            guard let message = try await iterator.next() else {
                throw link.endReason ?? PairingError(code: .connectionLost, message: "the connection ended")
            }
            return message
        } catch let error as PairingError {
            throw error
        } catch {
            throw link.endReason ?? PairingError(code: .connectionLost, message: "\(error)")
        }
    }
}

/// Runs blocking work (a key derivation, fsync) on a dispatch thread, never on the cooperative pool.
enum OffPool {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }
}
