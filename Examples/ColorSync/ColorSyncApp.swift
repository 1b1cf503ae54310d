import Foundation
import Hearth
import Synchronization

/// Apple's "Synchronizing app preferences with iCloud" sample (ColorSync) as a terminal app:
/// the screen shows one of four background colours; keys 0-3 pick one; every other running
/// instance in the same household account switches to it. As in Apple's sample, the colour
/// is mirrored into UserDefaults (the local source of truth) and the change reason is shown.
///
/// Usage: hearth-color-sync [--config-dir DIR] [--data-dir DIR] [--port N] [--peer HOST:PORT]… [--defaults-suite NAME]
@main
struct ColorSyncApp {
    /// The key Apple's sample stores the colour under.
    static let colorKey = "backgroundColor"
    static let storeIdentifier = "com.example.colorsync"

    static func main() async {
        let options = Options(CommandLine.arguments.dropFirst())
        var configuration = UbiquitousKeyValueStore.Configuration()
        if let data = options.dataDirectory { configuration.dataDirectory = data }
        var sync = SyncSettings(accountDirectory: options.configDirectory,
                                discovery: options.peers.isEmpty ? .automatic : .staticPeers(options.peers),
                                port: options.port ?? 0, heartbeatInterval: .seconds(2), timeout: .seconds(8))
        sync.isEnabled = true
        configuration.sync = sync
        configuration.logger.logLevel = .error

        let store: UbiquitousKeyValueStore
        do {
            store = try UbiquitousKeyValueStore(storeIdentifier: storeIdentifier, configuration: configuration)
        } catch {
            FileHandle.standardError.write(Data("hearth-color-sync: \(error)\n".utf8))
            exit(1)
        }
        let screen = ColorScreen(store: store, defaultsSuite: options.defaultsSuite)
        await screen.run()
        await store.internals.close()
    }
}

/// The command line, kept tiny: the example should read like an app, not like a CLI.
struct Options {
    var configDirectory: String?
    var dataDirectory: String?
    var port: Int?
    var peers: [String] = []
    var defaultsSuite = "com.example.colorsync"

    init(_ arguments: ArraySlice<String>) {
        var rest = arguments
        while let flag = rest.popFirst() {
            let value = rest.popFirst()
            switch flag {
            case "--config-dir": configDirectory = value
            case "--data-dir": dataDirectory = value
            case "--port": port = value.flatMap(Int.init)
            case "--peer": if let value { peers.append(value) }
            case "--defaults-suite": if let value { defaultsSuite = value }
            default:
                FileHandle.standardError.write(Data("usage: hearth-color-sync [--config-dir DIR] [--data-dir DIR] [--port N] [--peer HOST:PORT]… [--defaults-suite NAME]\n".utf8))
                exit(2)
            }
        }
    }
}
