/// The scrypt cost of an encrypted CA key (RFC 7914: N, r, p): an account's `ca.key`,
/// sealed under the account passphrase, and the same key in a join bundle.
///
/// A sealed key carries its own parameters, so a reader must bound them before deriving
/// anything: scrypt's cost grows with N · r · p and its memory with N · r, and a crafted
/// bundle with p = 8000 kept `hearth account join` busy for over a minute. A reader
/// accepts at most ``maximum`` (what Hearth writes), which also keeps bundles written
/// with older, cheaper parameters readable.
package struct ScryptParameters: Hashable, Sendable, CustomStringConvertible {
    /// CPU/memory cost, a power of two.
    package let n: UInt64
    /// Block size.
    package let r: UInt64
    /// Parallelisation.
    package let p: UInt64

    package init(n: UInt64, r: UInt64, p: UInt64) {
        self.n = n
        self.r = r
        self.p = p
    }

    /// What Hearth writes: N = 2^18, r = 8, p = 1 — 256 MiB and about a second of CPU per guess
    /// (docs/security.md has the figure), so guessing the passphrase offline is slow.
    package static let standard = ScryptParameters(n: 1 << 18, r: 8, p: 1)

    /// The most a reader accepts. Equal to ``standard``: nothing Hearth writes costs more,
    /// so anything more is a crafted bundle.
    package static let maximum = standard

    /// Cheap parameters for tests, which create accounts and join devices by the hundred:
    /// the library's own test clusters (``AccountStore``'s `scrypt` knob, a `package`
    /// initialiser) and, under `HEARTH_TEST_WEAK_SCRYPT=1`, the `hearth` command the tests
    /// spawn. Only a writer can choose them (not reachable from a bundle or a file); a
    /// reader's ceiling stays ``maximum``. A guess at a key sealed with them costs 256 times
    /// less than with ``standard``: for test accounts only.
    package static let testing = ScryptParameters(n: 1 << 10, r: 8, p: 1)

    /// Whether a guess with these parameters costs at least what one with `other` does, in
    /// work (N · r · p) and in memory (N · r). Parameters read from a key are already bounded
    /// by ``maximum``, so the products cannot overflow.
    package func isAtLeastAsCostly(as other: ScryptParameters) -> Bool {
        n * r * p >= other.n * other.r * other.p && n * r >= other.n * other.r
    }

    /// The memory scrypt needs with these parameters, as OpenSSL counts it
    /// (128 · r · (N + 2) for V plus 128 · r · p for B), in bytes.
    var memoryBytes: UInt64 { 128 * r * (n + 2) + 128 * r * p }

    /// Whether a reader may run scrypt with these parameters: N a power of two in
    /// 2 ... maximum.n, 1 ≤ r ≤ maximum.r, 1 ≤ p ≤ maximum.p.
    var isWithinMaximum: Bool {
        let max = Self.maximum
        return n >= 2 && n <= max.n && n & (n - 1) == 0 && (1...max.r).contains(r) && (1...max.p).contains(p)
    }

    package var description: String {
        let log = n > 0 && n & (n - 1) == 0 ? "2^\(n.trailingZeroBitCount)" : "\(n)"
        return "N = \(log), r = \(r), p = \(p)"
    }
}
