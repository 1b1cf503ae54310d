/// Why a frame was refused. Any of these closes the connection: a peer that sends one is
/// broken or hostile, and no later byte of the stream can be trusted to be a frame boundary.
public struct FrameError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The length prefix is zero: frames always carry a message.
        public static let zeroLength = Code("zeroLength")
        /// The length prefix is over the cap. Garbage (a plaintext line, an HTTP request)
        /// usually lands here, since its first four bytes read as a huge length.
        public static let tooLarge = Code("tooLarge")
        /// The stream ended inside a frame.
        public static let truncated = Code("truncated")
        /// The upper layer could not parse a frame's payload.
        public static let malformed = Code("malformed")
    }

    public var code: Code
    public var reason: String

    public init(code: Code, reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "frame \(code): \(reason)" }

    public static func tooLarge(_ length: UInt32, cap: Int) -> FrameError {
        FrameError(code: .tooLarge, reason: "length \(length) is over the cap of \(cap) bytes")
    }

    public static func malformed(_ reason: String) -> FrameError { FrameError(code: .malformed, reason: reason) }
}
