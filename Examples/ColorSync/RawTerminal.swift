import Foundation

/// Puts the terminal in raw mode (keys arrive one at a time, unechoed) and restores it.
/// Not Sendable on purpose: it belongs to the screen's run loop.
final class RawTerminal {
    private var saved = termios()
    private let isTerminal: Bool

    init() {
        isTerminal = isatty(0) == 1 && tcgetattr(0, &saved) == 0
        guard isTerminal else { return }
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
        // One byte at a time, no timeout: read(2) returns as soon as a key is pressed.
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        tcsetattr(0, TCSAFLUSH, &raw)
        FileHandle.standardOutput.write(Data("\u{1B}[?25l".utf8))   // hide the cursor
    }

    func restore() {
        FileHandle.standardOutput.write(Data("\u{1B}[0m\u{1B}[2J\u{1B}[H\u{1B}[?25h".utf8))
        if isTerminal { tcsetattr(0, TCSAFLUSH, &saved) }
    }
}
