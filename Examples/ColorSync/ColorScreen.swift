import Foundation
import Hearth
import Synchronization

/// The app's one screen: draws the colour, handles keys, reacts to external changes.
final class ColorScreen: Sendable {
    /// Apple's sample offers four colours, numbered 0 to 3.
    static let colors: [(name: String, background: Int, foreground: Int)] = [
        ("white", 47, 30), ("red", 41, 97), ("green", 42, 30), ("blue", 44, 97),
    ]

    private struct State {
        var color: Int
        var lastChange = "started; waiting for changes from other devices"
    }

    private let store: UbiquitousKeyValueStore
    private let mirror: UserDefaultsMirror
    private let state: Mutex<State>
    /// Every redraw goes through one queue, so frames never interleave.
    private let drawing = DispatchQueue(label: "colorsync.draw")
    private let keys: AsyncStream<UInt8>
    private let keyInput: AsyncStream<UInt8>.Continuation

    init(store: UbiquitousKeyValueStore, defaultsSuite: String) {
        self.store = store
        // As in Apple's sample: the defaults database stays the local source of truth, and
        // external changes are copied into it.
        mirror = UserDefaultsMirror(store: store, suiteName: defaultsSuite, keys: [ColorSyncApp.colorKey])
        store.synchronize()
        let defaults = mirror.defaults
        let initial = store.object(forKey: ColorSyncApp.colorKey) != nil
            ? Int(store.longLong(forKey: ColorSyncApp.colorKey)) : defaults.integer(forKey: ColorSyncApp.colorKey)
        state = Mutex(State(color: (0...3).contains(initial) ? initial : 0))
        (keys, keyInput) = AsyncStream<UInt8>.makeStream()
    }

    func run() async {
        let terminal = RawTerminal()
        let observer = NotificationCenter.default.addObserver(
            forName: NSUbiquitousKeyValueStore.didChangeExternallyNotification, object: store, queue: nil
        ) { [self] note in
            // Apple's sample: read the reason, then the changed keys.
            let reason = note.userInfo?[NSUbiquitousKeyValueStoreChangeReasonKey] as? Int ?? -1
            let changed = note.userInfo?[NSUbiquitousKeyValueStoreChangedKeysKey] as? [String] ?? []
            externalChange(reason: reason, keys: changed)
        }
        let signals = [SIGINT, SIGTERM].map { number -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [keyInput] in keyInput.yield(UInt8(ascii: "q")) }
            source.resume()
            return source
        }
        Thread.detachNewThread { [keyInput] in
            var byte: UInt8 = 0
            while read(0, &byte, 1) == 1 { keyInput.yield(byte) }
            keyInput.yield(UInt8(ascii: "q"))
        }
        let ticker = Task { [self] in
            while !Task.isCancelled {
                redraw()
                try? await Task.sleep(for: .seconds(1))
            }
        }
        for await key in keys {
            if key == UInt8(ascii: "q") || key == 3 || key == 4 { break }
            if (UInt8(ascii: "0")...UInt8(ascii: "3")).contains(key) { pick(Int(key - UInt8(ascii: "0"))) }
        }
        ticker.cancel()
        NotificationCenter.default.removeObserver(observer)
        for source in signals { source.cancel() }
        mirror.stop()
        drawing.sync { terminal.restore() }
    }

    /// The user picked a colour here: store it (which syncs it) and mirror it locally.
    private func pick(_ color: Int) {
        store.set(Int64(color), forKey: ColorSyncApp.colorKey)
        mirror.defaults.set(color, forKey: ColorSyncApp.colorKey)
        mirror.defaults.synchronize()
        state.withLock { s in
            s.color = color
            s.lastChange = "you picked \(color) (\(Self.colors[color].name))"
        }
        redraw()
    }

    private func externalChange(reason: Int, keys: [String]) {
        guard keys.contains(ColorSyncApp.colorKey) else { return }
        let value = store.object(forKey: ColorSyncApp.colorKey) as? Int64 ?? store.longLong(forKey: ColorSyncApp.colorKey)
        let name = ChangeReason(rawValue: reason).map { "\($0)" } ?? "unknown"
        state.withLock { s in
            if (0...3).contains(value) { s.color = Int(value) }
            s.lastChange = "\(name) (\(reason)): another device set \(value)"
        }
        redraw()
    }

    private func redraw() {
        let (color, lastChange) = state.withLock { ($0.color, $0.lastChange) }
        let peers = store.connectedPeerCount
        let account = store.accountID.map { String($0.prefix(8)) } ?? "signed out"
        drawing.async {
            let (name, background, foreground) = Self.colors[color]
            var size = winsize()
            let rows = ioctl(1, UInt(TIOCGWINSZ), &size) == 0 && size.ws_row > 0 ? Int(size.ws_row) : 12
            let lines = [
                "  ColorSync  (Apple's sample, synced by Hearth)",
                "",
                "  colour: \(color) \(name)",
                "  last change: \(lastChange)",
                "  account \(account), \(peers) peer\(peers == 1 ? "" : "s") connected",
                "",
                "  keys: 0 white  1 red  2 green  3 blue   q quit",
            ]
            var frame = "\u{1B}[\(background);\(foreground)m\u{1B}[H\u{1B}[2J"
            for row in 0..<max(rows, lines.count) {
                frame += "\u{1B}[\(row + 1);1H\u{1B}[K" + (row < lines.count ? lines[row] : "")
            }
            frame += "\u{1B}[0m\u{1B}[\(rows);1H"
            FileHandle.standardOutput.write(Data(frame.utf8))
        }
    }
}
