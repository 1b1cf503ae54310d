import Foundation

extension Data {
    /// A copy of `bytes`, made with one `memcpy`.
    ///
    /// `Data(_:)` over a generic sequence (a slice of a raw buffer, a `ByteBuffer`'s view) asks
    /// the runtime, on every call, whether the sequence is contiguous (a conformance lookup and
    /// a dynamic cast): about 2 % of a daemon's CPU per write through it, where every frame and
    /// every data field of a property list is copied this way (docs/benchmarks.md, section 8).
    @inlinable
    package init(copying bytes: UnsafeRawBufferPointer) {
        if let base = bytes.baseAddress, !bytes.isEmpty {
            self.init(bytes: base, count: bytes.count)
        } else {
            self.init()
        }
    }
}
