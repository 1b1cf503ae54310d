import Foundation
import HearthCore
import Testing

@Suite("Replica IDs as bytes")
struct ReplicaIDTests {
    @Test("From 16 bytes of Data as from an array, a slice of Data included; back to the same bytes; other lengths refused")
    func fromData() throws {
        let id = ReplicaID(high: 0x0011_2233_4455_6677, low: 0x8899_AABB_CCDD_EEFF)
        let bytes = id.bytes
        #expect(bytes == [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF])
        #expect(id.data == Data(bytes))
        #expect(ReplicaID(bytes: Data(bytes)) == id)
        // A slice whose indices do not start at 0 (a field cut out of a larger buffer).
        let slice = Data([0xAB] + bytes + [0xCD]).dropFirst().dropLast()
        #expect(slice.startIndex == 1)
        #expect(ReplicaID(bytes: slice) == id)
        #expect(ReplicaID(bytes: Data(bytes.prefix(15))) == nil)
        #expect(ReplicaID(bytes: Data(bytes + [0])) == nil)
        for _ in 0..<20 {
            let random = ReplicaID.random()
            #expect(ReplicaID(bytes: random.data) == random)
            #expect(ReplicaID(bytes: random.bytes) == random)
        }
    }

    @Test("A device's prefix is its first 8 bytes, fewer if it has fewer, from a slice as from whole Data")
    func devicePrefix() {
        #expect(ReplicaID.devicePrefix(of: Data([1, 2, 3, 4, 5, 6, 7, 8, 9])) == 0x0102_0304_0506_0708)
        #expect(ReplicaID.devicePrefix(of: Data([1, 2, 3])) == 0x010203)
        #expect(ReplicaID.devicePrefix(of: Data([9, 1, 2, 3, 4, 5, 6, 7, 8]).dropFirst()) == 0x0102_0304_0506_0708)
        let device = Data((0..<32).map { UInt8($0) })
        let bound = ReplicaID.random(boundTo: device)
        #expect(bound.isBound(to: device))
        #expect(!bound.isBound(to: Data(device.reversed())))
        #expect(!bound.isBound(to: device.prefix(7)))
    }
}
