import Foundation
import HearthCore
import HearthTransport
import NIOCore
import Testing

@Suite("A frame's bytes as Data")
struct ByteBufferDataTests {
    @Test("readableData is the readable bytes alone: after the reader index, within a slice, empty when none")
    func readableData() throws {
        var buffer = ByteBuffer(bytes: [1, 2, 3, 4, 5, 6])
        buffer.moveReaderIndex(forwardBy: 2)
        #expect(buffer.readableData == Data([3, 4, 5, 6]))
        let slice = try #require(buffer.getSlice(at: 3, length: 2))
        #expect(slice.readableData == Data([4, 5]))
        buffer.moveReaderIndex(forwardBy: 4)
        #expect(buffer.readableData.isEmpty)
        #expect(Data(copying: UnsafeRawBufferPointer(start: nil, count: 0)).isEmpty)
    }
}
