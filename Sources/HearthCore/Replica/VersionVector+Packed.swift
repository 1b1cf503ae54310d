import Foundation

// A vector as the sync protocol carries it (protocol 4): one data object instead of a
// dictionary keyed by hex strings, which took about 45 bytes per origin against 17 here.

extension VersionVector {
    /// `(16-byte origin · counter as unsigned LEB128)*`, origins in ascending order.
    ///
    /// ```swift
    /// let vector = VersionVector([origin: 3])
    /// vector.packed.count                     // 17
    /// VersionVector(packed: vector.packed)    // vector
    /// ```
    package var packed: Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(counters.count * 18)
        for origin in counters.keys.sorted() {
            bytes.append(contentsOf: origin.bytes)
            var counter = counters[origin]!
            repeat {
                let low = UInt8(counter & 0x7f)
                counter >>= 7
                bytes.append(counter == 0 ? low : low | 0x80)
            } while counter != 0
        }
        return Data(bytes)
    }

    /// Reads ``packed`` back; `nil` unless it is exactly that form: origins strictly ascending,
    /// every counter above zero in its shortest encoding, no trailing bytes, and at most
    /// `maximumOrigins` origins (checked before anything is kept).
    package init?(packed data: Data, maximumOrigins: Int = Replica.maximumVectorOrigins) {
        // The fewest bytes an origin can take: a bound on the count before any is read.
        guard data.count / 17 <= maximumOrigins else { return nil }
        var counters: [ReplicaID: UInt64] = [:]
        var previous: ReplicaID?
        let parsed = data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Bool in
            var index = 0
            while index < raw.count {
                guard raw.count - index >= 17 else { return false }
                guard let origin = ReplicaID(bytes: raw[index..<index + 16]) else { return false }
                index += 16
                if let previous, !(previous < origin) { return false }
                previous = origin
                var counter: UInt64 = 0
                var shift: UInt64 = 0
                while true {
                    guard index < raw.count, shift < 64 else { return false }
                    let byte = raw[index]
                    index += 1
                    let bits = UInt64(byte & 0x7f)
                    // The tenth byte may only hold the 64th bit.
                    guard shift < 63 || bits <= 1 else { return false }
                    counter |= bits << shift
                    if byte & 0x80 == 0 {
                        // Shortest form: no trailing zero group (but a single zero byte, which
                        // the counter check below refuses anyway).
                        guard byte != 0 || shift == 0 else { return false }
                        break
                    }
                    shift += 7
                }
                guard counter > 0 else { return false }
                counters[origin] = counter
            }
            return true
        }
        guard parsed else { return nil }
        self.init(counters)
    }
}
