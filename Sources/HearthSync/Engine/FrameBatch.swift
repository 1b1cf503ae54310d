import HearthTransport
import NIOCore

/// The frames a session's writer has encoded and not yet handed to the channel.
///
/// The writer empties its mailbox, then flushes once: what one wake-up produced (a `store`
/// and a `delta`, an `ack` and a `links`) leaves in one write and, when small, one TLS record
/// (the TLS handler gathers what is flushed together). Past ``limit`` bytes it is written at
/// once, so a big download does not wait in memory; the channel's backpressure then applies.
/// Used by the writer alone, on its session's loop: its methods run where they are called
/// (`nonisolated(nonsending)`), so the batch never leaves the session.
final class FrameBatch {
    /// Written without waiting for the mailbox to empty past this many bytes.
    static let limit = 256 * 1024

    private let channel: any PeerLinkWriter
    private var frames: [ByteBuffer] = []
    private var bytes = 0

    init(_ channel: any PeerLinkWriter) {
        self.channel = channel
    }

    nonisolated(nonsending) func append(_ frame: ByteBuffer) async throws {
        frames.append(frame)
        bytes += frame.readableBytes
        if bytes >= Self.limit { try await flush() }
    }

    nonisolated(nonsending) func flush() async throws {
        guard !frames.isEmpty else { return }
        let batch = frames
        frames = []
        bytes = 0
        try await channel.writeFrames(batch)
    }
}
