import Foundation
import Hearth
import Synchronization

/// The list, its commands, and what it prints when other devices change it.
final class ShoppingList: Sendable {
    struct Item {
        let key: String
        var title: String
        var done: Bool
        var by: String
    }

    private let store: UbiquitousKeyValueStore
    private let deviceName: String
    /// The value this device last wrote per key, to notice when a later write from another
    /// device replaced it (last-writer-wins at work).
    private let myWrites = Mutex<[String: PropertyListValue]>([:])

    init(store: UbiquitousKeyValueStore, deviceName: String) {
        self.store = store
        self.deviceName = deviceName
    }

    /// Items in a stable order (by title, then key) so numbers match across devices.
    var items: [Item] {
        store.values.compactMap { key, value -> Item? in
            guard key.hasPrefix("item-"), let fields = value.dictionaryValue, let title = fields["title"]?.stringValue else { return nil }
            return Item(key: key, title: title, done: fields["done"]?.boolValue ?? false, by: fields["by"]?.stringValue ?? "?")
        }.sorted { ($0.title, $0.key) < ($1.title, $1.key) }
    }

    func run() async {
        say("shopping list as \(deviceName) (account \(store.accountID.map { String($0.prefix(8)) } ?? "signed out")); type help")
        let changes = store.changes
        let watcher = Task { [self] in
            for await change in changes { report(change) }
        }
        show()
        while let line = readLine() {
            if !handle(line.trimmingCharacters(in: .whitespaces)) { break }
        }
        watcher.cancel()
        // A command-line app exits right away: make sure the last edit reached a peer first.
        if store.isSyncing { _ = await store.waitUntilSynced(peers: 1, timeout: .seconds(3)) }
    }

    /// Runs one command; false to quit.
    private func handle(_ line: String) -> Bool {
        let words = line.split(separator: " ", maxSplits: 1).map(String.init)
        guard let command = words.first else { return true }
        let argument = words.count > 1 ? words[1] : ""
        switch command {
        case "add" where !argument.isEmpty:
            write(Item(key: "item-" + UUID().uuidString.prefix(8).lowercased(), title: argument, done: false, by: deviceName))
        case "tick", "untick":
            guard var item = item(argument) else { return true }
            item.done = command == "tick"
            item.by = deviceName
            write(item)
        case "rename":
            let parts = argument.split(separator: " ", maxSplits: 1).map(String.init)
            guard parts.count == 2, var item = item(parts[0]) else { say("usage: rename N NEW TITLE"); return true }
            item.title = parts[1]
            item.by = deviceName
            write(item)
        case "rm":
            guard let item = item(argument) else { return true }
            store.removeObject(forKey: item.key)
            myWrites.withLock { $0[item.key] = nil }
            show()
        case "list": show()
        case "quit", "q", "exit": return false
        default: say("commands: add TEXT | tick N | untick N | rename N TEXT | rm N | list | quit")
        }
        return true
    }

    private func item(_ number: String) -> Item? {
        let all = items
        guard let n = Int(number), (1...all.count).contains(n) else {
            say("no item \(number); see list")
            return nil
        }
        return all[n - 1]
    }

    private func write(_ item: Item) {
        let value: PropertyListValue = ["title": .string(item.title), "done": .bool(item.done), "by": .string(item.by)]
        do {
            try store.setValue(value, forKey: item.key)
            myWrites.withLock { $0[item.key] = value }
        } catch {
            say("not saved: \(error)")
        }
        show()
    }

    /// Prints what another device changed, and whether it overrode one of our edits.
    private func report(_ change: ChangeEvent) {
        for key in change.keys where key.hasPrefix("item-") {
            let now = store.value(forKey: key)
            let mine = myWrites.withLock { $0.removeValue(forKey: key) }
            let title = now?.dictionaryValue?["title"]?.stringValue ?? mine?.dictionaryValue?["title"]?.stringValue ?? key
            if let mine, mine != now {
                let by = now?.dictionaryValue?["by"]?.stringValue ?? "another device"
                say("[\(change.reason)] \(title): \(now == nil ? "removed" : "changed") by \(by); the later write replaces your edit (last writer wins)")
            } else if now == nil {
                say("[\(change.reason)] \(title): removed by another device")
            } else {
                say("[\(change.reason)] \(title): changed by \(now?.dictionaryValue?["by"]?.stringValue ?? "another device")")
            }
        }
        show()
    }

    private func show() {
        let all = items
        var text = all.isEmpty ? "  (the list is empty: add milk)\n" : ""
        for (n, item) in all.enumerated() {
            text += "  \(n + 1). [\(item.done ? "x" : " ")] \(item.title)   (\(item.by))\n"
        }
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    private func say(_ line: String) {
        // Unbuffered, so lines appear at once even through a pipe.
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
