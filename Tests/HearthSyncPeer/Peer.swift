import Dispatch
import Foundation
import Hearth
import HearthCore
import Synchronization

/// The peer's logic, outside main.swift: closures there would be main-actor isolated, and
/// dispatch sources and tasks call them from other threads.
enum Peer {
    static func run() -> Never {
        // First of all: until these are ignored, a SIGUSR1 (stop writing) or SIGTERM would
        // kill the peer outright, and the test may send one as soon as it sees sync start.
        signal(SIGUSR1, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        var dataArgument = "", config = "", nameArgument = "peer", port = 0, peers: [String] = [], avahi = false, writeArgument = false
        var timeout: Duration = .seconds(15)
        // A clock this far off (ms), one key written instead of 22, and each tenth write awaited
        // until a peer acknowledged it ("acknowledged N"), for the tests that need them.
        var skewArgument: Int64 = 0, counterOnlyArgument = false, confirmArgument = false
        var interval: Duration = .milliseconds(5)
        var arguments = CommandLine.arguments.dropFirst().makeIterator()
        while let argument = arguments.next() {
            switch argument {
            case "--data": dataArgument = arguments.next() ?? ""
            case "--config": config = arguments.next() ?? ""
            case "--name": nameArgument = arguments.next() ?? nameArgument
            case "--port": port = Int(arguments.next() ?? "") ?? 0
            case "--peer": peers.append(arguments.next() ?? "")
            case "--avahi": avahi = true
            case "--write": writeArgument = true
            case "--timeout": timeout = .milliseconds(Int(arguments.next() ?? "") ?? 15_000)
            case "--interval": interval = .milliseconds(Int(arguments.next() ?? "") ?? 5)
            case "--clock-skew-ms": skewArgument = Int64(arguments.next() ?? "") ?? 0
            case "--counter-only": counterOnlyArgument = true
            case "--confirm": confirmArgument = true
            default:
                say("unknown argument \(argument)")
                exit(64)
            }
        }

        // Fixed from here on: closures below capture them.
        let (data, name, write) = (dataArgument, nameArgument, writeArgument)
        let (counterOnly, confirm) = (counterOnlyArgument, confirmArgument)
        let sync = SyncSettings(accountDirectory: config, discovery: avahi ? .automatic : .staticPeers(peers),
                                listenHost: avahi ? "0.0.0.0" : "127.0.0.1", port: port, heartbeatInterval: .milliseconds(500), timeout: timeout)
        let store: UbiquitousKeyValueStore
        do {
            var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: data, writeBehindDelay: .milliseconds(100), sync: sync)
            configuration.clockSkew = .milliseconds(skewArgument)
            store = try UbiquitousKeyValueStore(storeIdentifier: "com.example.processes", configuration: configuration)
        } catch {
            say("error \(error)")
            exit(1)
        }

        let writing = Writing()


        let stopWriting = DispatchSource.makeSignalSource(signal: SIGUSR1)
        stopWriting.setEventHandler { writing.stop() }
        stopWriting.resume()
        let terminate = DispatchSource.makeSignalSource(signal: SIGTERM)
        terminate.setEventHandler {
            store.synchronize()
            exit(0)
        }
        terminate.resume()

        let snapshots = DispatchSource.makeTimerSource()
        snapshots.schedule(deadline: .now(), repeating: .milliseconds(100))
        snapshots.setEventHandler {
            try? AtomicFile.write(try BinaryPropertyList.encode(.dictionary(store.values)), to: "\(data)/snapshot.bplist")
        }
        snapshots.resume()

        Task {
            do {
                say("listening \(try await store.syncPort() ?? -1)")
            } catch {
                say("error \(error)")
                exit(1)
            }
            guard write else { return }
            var counter = store.longLong(forKey: "\(name)-counter")
            while writing.on {
                counter += 1
                store.set(counter, forKey: "\(name)-counter")
                if !counterOnly {
                    store.set("\(name) wrote \(counter)", forKey: "\(name)-k\(counter % 20)")
                    store.set(counter, forKey: "shared")
                }
                if counter % 10 == 0, store.synchronize() { say("confirmed \(counter)") }
                if confirm, counter % 10 == 0, await store.waitUntilSynced(peers: 1, timeout: .seconds(10)) { say("acknowledged \(counter)") }
                try? await Task.sleep(for: interval)
            }
            store.synchronize()
            say("stopped writing at \(counter)")
        }


        dispatchMain()
    }
}

final class Writing: Sendable {
    private let flag = Mutex(true)
    var on: Bool { flag.withLock { $0 } }
    func stop() { flag.withLock { $0 = false } }
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
