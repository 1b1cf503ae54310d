import Foundation
import HearthCore
import NIOCore

extension ByteBuffer {
    /// The readable bytes as `Data`, copied with one `memcpy` (``Foundation/Data/init(copying:)``):
    /// how a frame's payload reaches the property-list decoder.
    package var readableData: Data {
        withUnsafeReadableBytes { Data(copying: $0) }
    }
}
