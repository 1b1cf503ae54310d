import CHearthOpenSSL
import Foundation

/// Helpers to move bytes through OpenSSL's memory BIOs (for PEM and DER encoders that
/// only speak BIO).
package enum MemoryBIO {
    /// Runs `body` with a writable memory BIO and returns what it wrote, or nil when
    /// `body` reports failure.
    package static func collect(_ body: (OpaquePointer) -> Bool) -> [UInt8]? {
        guard let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard body(bio) else { return nil }
        var data: UnsafeMutablePointer<CChar>?
        let length = hearth_BIO_get_mem_data(bio, &data)
        guard length >= 0, let data else { return length == 0 ? [] : nil }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) {
            Array(UnsafeBufferPointer(start: $0, count: length))
        }
    }

    /// Runs `body` with a read-only memory BIO over `bytes`.
    package static func read<T>(_ bytes: some Collection<UInt8>, _ body: (OpaquePointer) -> T) -> T? {
        let input = Array(bytes)
        return input.withUnsafeBytes { raw -> T? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return body(bio)
        }
    }
}
