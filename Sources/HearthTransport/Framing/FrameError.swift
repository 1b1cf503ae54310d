/// Why a frame was refused. Any of these closes the connection: a peer that sends one is
/// broken or hostile, and no later byte of the stream can be trusted to be a frame boundary.
package struct FrameError: Error, Hashable, Sendable, CustomStringConvertible {
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        package let name: String
        package init(_ name: String) { self.name = name }
        package var description: String { name }

        /// The length prefix is zero: frames always carry a message.
        package static let zeroLength = Code("zeroLength")
        /// The length prefix is over the cap. Garbage (a plaintext line, an HTTP request)
        /// usually lands here, since its first four bytes read as a huge length.
        package static let tooLarge = Code("tooLarge")
        /// The stream ended inside a frame.
        package static let truncated = Code("truncated")
        /// The upper layer could not parse a frame's payload.
        package static let malformed = Code("malformed")
    }

    package var code: Code
    package var reason: String

    package init(code: Code, reason: String) {
        self.code = code
        self.reason = reason
    }

    package var description: String { "frame \(code): \(reason)" }

    package static func tooLarge(_ length: UInt32, cap: Int) -> FrameError {
        FrameError(code: .tooLarge, reason: "length \(length) is over the cap of \(cap) bytes")
    }

    package static func malformed(_ reason: String) -> FrameError { FrameError(code: .malformed, reason: reason) }
}
