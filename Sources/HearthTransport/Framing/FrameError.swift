import HearthCore

/// Why a frame was refused. Any of these closes the connection: a peer that sends one is
/// broken or hostile, and no later byte of the stream can be trusted to be a frame boundary.
package typealias FrameError = HearthError<FrameErrors>

/// The domain of ``FrameError``.
package enum FrameErrors: HearthErrorDomain {
    package static func describe(code: ErrorCode<FrameErrors>, reason: String) -> String { "frame \(code): \(reason)" }
}

extension ErrorCode where Domain == FrameErrors {
    /// The length prefix is zero: frames always carry a message.
    package static var zeroLength: Self { Self("zeroLength") }
    /// The length prefix is over the cap. Garbage (a plaintext line, an HTTP request)
    /// usually lands here, since its first four bytes read as a huge length.
    package static var tooLarge: Self { Self("tooLarge") }
    /// The stream ended inside a frame.
    package static var truncated: Self { Self("truncated") }
    /// The upper layer could not parse a frame's payload.
    package static var malformed: Self { Self("malformed") }
}

extension HearthError where Domain == FrameErrors {
    package static func tooLarge(_ length: UInt32, cap: Int, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.tooLarge, "length \(length) is over the cap of \(cap) bytes", file: file, line: line)
    }

    package static func malformed(_ reason: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.malformed, reason, file: file, line: line)
    }
}
