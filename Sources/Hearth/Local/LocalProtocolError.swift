/// A frame of the local attach protocol that could not be understood (docs/local-attach.md):
/// the side that reads it logs this and closes the connection.
struct LocalProtocolError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
