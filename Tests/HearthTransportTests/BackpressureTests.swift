import Foundation
import HearthCore
import HearthIdentity
@testable import HearthTransport
import HearthTesting
import NIOCore
import Synchronization
import Testing

extension TransportTests {
    @Suite("Backpressure")
    struct BackpressureTests {
        final class Counter: Sendable {
            let value = Atomic<Int>(0)
        }

        @Test("A sender to a peer that does not read is suspended, not buffered without bound; all arrives once it reads")
        func slowReader() async throws {
            let home = try Household()
            let logs = LogCapture()
            let serverTransport = try PeerTransport(configuration: TLSConfiguration(identity: home.server, logger: logs.logger("server")))
            let listener = try await serverTransport.listen(host: "127.0.0.1", port: 0)
            let frameCount = 100, frameSize = 1 << 20
            let paused = Mutex<Bool>(true), resumed = ChangeSignal()
            let reader = Task { () -> Int in
                var iterator = listener.connections.makeAsyncIterator()
                guard let connection = await iterator.next() else { return -1 }
                // Reads once told to (a signal, not a poll).
                _ = await ChangeSignal.waitUntil(ContinuousClock.now + .seconds(120), observing: { [resumed] }) { !paused.withLock { $0 } }
                return (try? await connection.executeThenClose { inbound, _ in
                    var received = 0
                    for try await frame in inbound {
                        #expect(frame.readableBytes == frameSize)
                        received += 1
                        if received == frameCount { break }
                    }
                    return received
                }) ?? -2
            }
            let connection = try await clientTransport(home.laptop).connect(host: "127.0.0.1", port: listener.port!)
            let written = Counter()
            let writer = Task {
                try await connection.executeThenClose { inbound, outbound in
                    let frame = ByteBuffer(repeating: 0x5a, count: frameSize)
                    for _ in 0..<frameCount {
                        try await outbound.write(frame)
                        written.value.add(1, ordering: .relaxed)
                        // NIO's writer accepts elements until the event loop reports the
                        // channel unwritable; a pause lets that report arrive, as it would
                        // between real messages.
                        try await Task.sleep(for: .milliseconds(2))
                    }
                    for try await _ in inbound {}  // until the server closes
                }
            }
            // Wait until the writer has stopped advancing (for half a second): how far it got
            // is what the buffers between it and the paused reader hold. Unbounded buffering
            // would let it write all 100 MiB. (How far it gets depends on when the event loop
            // reports the channel unwritable: on a busy machine, later.)
            var whilePaused = 0, suspended = false
            let giveUp = ContinuousClock.now + .seconds(20)
            while !suspended, ContinuousClock.now < giveUp {
                let before = written.value.load(ordering: .relaxed)
                try await Task.sleep(for: .milliseconds(500))
                whilePaused = written.value.load(ordering: .relaxed)
                suspended = whilePaused == before
            }
            print("frames written while the reader was paused: \(whilePaused) of \(frameCount)")
            #expect(suspended, "the writer kept going for 20 s")
            #expect(whilePaused < frameCount, "the writer should wait for the reader, it wrote \(whilePaused) MiB")
            paused.withLock { $0 = false }
            resumed.signal()
            #expect(await reader.value == frameCount)
            _ = try? await writer.value
            #expect(written.value.load(ordering: .relaxed) == frameCount)
            await listener.close()
        }
    }
}
