/// Where the daemon library's lines for people go. The library never writes to the process's
/// streams itself: the `hearth` command sends notes to stderr and output proper to stdout
/// (`DaemonOutput.standardStreams` there), a test keeps them to read.
package struct DaemonOutput: Sendable {
    /// A line for people: what a holder does and why (`daemon: holding store S`), refusals.
    package var note: @Sendable (String) -> Void
    /// A line of a command's output proper: the changes `watch` (and `serve --verbose`) print.
    package var emit: @Sendable (String) -> Void

    package init(note: @escaping @Sendable (String) -> Void, emit: @escaping @Sendable (String) -> Void) {
        self.note = note
        self.emit = emit
    }
}
