/// Why this process can neither host a store for others nor attach to the one that hosts it
/// (an unsafe socket folder, a host that refused the hello or never answered).
struct LocalAttachError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
