import Foundation
import Hearth
import Synchronization

/// A household shopping list: several instances (devices) add, tick and remove items, and
/// see each other's edits as they happen.
///
/// Each item is one key (`item-<id>`) holding a dictionary `{title, done, by}`. Edits to
/// different items never conflict. Two devices editing the *same* item at once is where
/// last-writer-wins shows: the whole item takes the later write's value, and the earlier
/// edit is gone. The app says so when that happens to one of your edits.
///
/// Usage: hearth-shopping-list [--config-dir DIR] [--data-dir DIR] [--port N] [--peer HOST:PORT]… [--name DEVICE]
/// then type: add TEXT | tick N | untick N | rename N TEXT | rm N | list | quit
@main
struct ShoppingListApp {
    static let storeIdentifier = "com.example.shoppinglist"

    static func main() async {
        var configuration = UbiquitousKeyValueStore.Configuration()
        var sync = SyncSettings(discovery: .automatic, heartbeatInterval: .seconds(2), timeout: .seconds(8))
        var name = ProcessInfo.processInfo.hostName
        var arguments = CommandLine.arguments.dropFirst()
        while let flag = arguments.popFirst() {
            let value = arguments.popFirst() ?? ""
            switch flag {
            case "--config-dir": sync.accountDirectory = value
            case "--data-dir": configuration.dataDirectory = value
            case "--port": sync.port = Int(value) ?? 0
            case "--peer":
                if case .staticPeers(let peers) = sync.discovery { sync.discovery = .staticPeers(peers + [value]) } else { sync.discovery = .staticPeers([value]) }
            case "--name": name = value
            default:
                print("usage: hearth-shopping-list [--config-dir DIR] [--data-dir DIR] [--port N] [--peer HOST:PORT]… [--name DEVICE]")
                exit(2)
            }
        }
        configuration.sync = sync
        configuration.logger.logLevel = .error
        let store: UbiquitousKeyValueStore
        do {
            store = try UbiquitousKeyValueStore(storeIdentifier: storeIdentifier, configuration: configuration)
        } catch {
            FileHandle.standardError.write(Data("hearth-shopping-list: \(error)\n".utf8))
            exit(1)
        }
        let list = ShoppingList(store: store, deviceName: name)
        await list.run()
        await store.internals.close()
    }
}
