/// What one signing device's current entries in a replica take (``Replica/signerUsage``): what
/// the bounds on one device's share of a store are checked against.
package struct SignerUsage: Sendable, Equatable {
    /// ``Entry/quotaSize`` of its live entries.
    package var bytes = 0
    /// Its live keys.
    package var keys = 0
    /// Its tombstones.
    package var tombstones = 0

    package init(bytes: Int = 0, keys: Int = 0, tombstones: Int = 0) {
        self.bytes = bytes
        self.keys = keys
        self.tombstones = tombstones
    }
}
