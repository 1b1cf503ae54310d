// A child process for the persistence tests (Tests/HearthTests/CrashSafetyTests.swift).
//
//   hearth-test-writer loop DIR STORE       write forever; print "confirmed N" after each
//                                           synchronize() that returned true
//   hearth-test-writer hold DIR STORE[,STORE…]
//                                           open each store, print "opened STORE host|attached" or
//                                           "error CODE: …", then hold them until killed
//   hearth-test-writer get DIR STORE KEY    open the store, print "read host|attached VALUE" (or
//                                           "absent") at once, and exit
//   hearth-test-writer put DIR STORE K=V…   write string values and exit without synchronize()
//   hearth-test-writer release DIR STORE K=V…
//                                           open ("opened host|attached"), write string values, let go
//                                           of the store without synchronize(), print "released MS"
//                                           (how long letting go took, in ms), and exit
//   hearth-test-writer release-on-loop DIR STORE K=V…
//                                           the same, but the last reference goes on an event loop of
//                                           the store's connection (the writes queued behind it), which
//                                           stays busy 300 ms after; exits 50 ms after it ("exiting released")
//   hearth-test-writer share DIR STORE NAME COUNT OTHER
//                                           open (hosting or attached, printed as "opened host|attached"),
//                                           wait for the file DIR/go, write NAME-1…NAME-COUNT, each after
//                                           OTHER's write of the one before (in step), print each
//                                           notification ("notify REASON KEY,KEY"), wait until OTHER-COUNT
//                                           is visible, print "saw BOOL", synchronize(), print "synced BOOL",
//                                           make DIR/saw-NAME and exit once DIR/saw-OTHER exists
//   hearth-test-writer watch DIR STORE KEY  open, print "opened host|attached KEY=VALUE", then each
//                                           notification as "notify REASON KEYS KEY=VALUE" (VALUE
//                                           "absent" when none), until killed
//   hearth-test-writer count DIR STORE NAME N MS
//                                           write NAME-1…NAME-N (values 1…N), MS ms apart, printing
//                                           "wrote I" every 10; then synchronize(), print "done N BOOL"
//                                           (HEARTH_TEST_PAUSE=N:FILE: after write N, print "paused N"
//                                           and wait until FILE exists)
//
// HEARTH_TEST_ATTACH=embedded opens with `.embedded` (own the file or fail), =required with
// `.required` (attach to the device daemon or fail); HEARTH_TEST_APPLE_INIT=1
// opens with Apple's non-throwing init (the data directory then comes from XDG_DATA_HOME).
import Foundation
import Hearth
import NIOPosix

/// What the modes print about a store, from any thread (notifications arrive on the store's queue).
enum Shown {
    static func value(_ key: String, in store: UbiquitousKeyValueStore) -> String {
        "\(key)=\(store.string(forKey: key) ?? "absent")"
    }

    /// Prints each notification of `store` as "notify REASON KEYS", then `detail()` if given.
    static func notifications(of store: UbiquitousKeyValueStore, detail: (@Sendable () -> String)? = nil) {
        _ = NotificationCenter.default.addObserver(forName: UbiquitousKeyValueStore.didChangeExternallyNotification, object: store, queue: nil) { note in
            let reason = note.userInfo?[NSUbiquitousKeyValueStoreChangeReasonKey] as? Int ?? -1
            let keys = note.userInfo?[NSUbiquitousKeyValueStoreChangedKeysKey] as? [String] ?? []
            say("notify \(reason) \(keys.joined(separator: ","))" + (detail.map { " " + $0() } ?? ""))
        }
    }
}

/// Blocks until the file at `path` exists, woken by inotify on its folder (the test makes it
/// when it is ready), not a poll.
func waitForFile(_ path: String) {
    let watch = inotify_init1(Int32(IN_CLOEXEC))
    defer { close(watch) }
    guard watch >= 0, inotify_add_watch(watch, (path as NSString).deletingLastPathComponent, UInt32(IN_CREATE | IN_MOVED_TO)) >= 0 else {
        say("error inotify: errno \(errno)")
        exit(70)
    }
    var buffer = [UInt8](repeating: 0, count: 4096)
    // Watched first, then checked: a file made in between is seen either way.
    while !FileManager.default.fileExists(atPath: path) { _ = read(watch, &buffer, buffer.count) }
}

/// Unbuffered, so the parent sees each line even when this process is killed.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
let arguments = CommandLine.arguments
guard arguments.count >= 4 else {
    FileHandle.standardError.write(Data("usage: hearth-test-writer loop|hold|put DIR STORE [K=V…]\n".utf8))
    exit(64)
}
let environment = ProcessInfo.processInfo.environment
let configuration = {
    var configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: arguments[2])
    switch environment["HEARTH_TEST_ATTACH"] {
    case "embedded": configuration.attach = .embedded
    case "required": configuration.attach = .required
    default: break
    }
    return configuration
}()

func open(_ identifier: String = arguments[3]) -> UbiquitousKeyValueStore {
    if environment["HEARTH_TEST_APPLE_INIT"] == "1" { return UbiquitousKeyValueStore(storeIdentifier: identifier) }
    do {
        return try UbiquitousKeyValueStore(storeIdentifier: identifier, configuration: configuration)
    } catch {
        say("error \(error.code): \(error)")
        exit(1)
    }
}

switch arguments[1] {
case "loop":
    let store = open()
    var i: Int64 = 0
    let padding = String(repeating: "p", count: 200)
    while true {
        i += 1
        store.set(i, forKey: "counter")
        store.set("\(i) \(padding)", forKey: "k\(i % 50)")
        if i % 25 == 0, store.synchronize() {
            say("confirmed \(i)")
        }
    }
case "hold":
    let stores = arguments[3].split(separator: ",").map { open(String($0)) }
    for store in stores { say("opened \(store.storeIdentifier) \(store.internals.isAttached ? "attached" : "host")") }
    while true { pause() }
case "get":
    guard arguments.count == 5 else { exit(64) }
    let store = open()
    let value = store.object(forKey: arguments[4]).map { "\($0)" } ?? "absent"
    say("read \(store.internals.isAttached ? "attached" : "host") \(value)")
    exit(0)
case "put":
    let store = open()
    for pair in arguments.dropFirst(4) {
        let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
        store.set(parts.count == 2 ? parts[1] : "", forKey: parts[0])
    }
    exit(0)
case "release":
    var store: UbiquitousKeyValueStore? = open()
    say("opened \(store!.internals.isAttached ? "attached" : "host")")
    for pair in arguments.dropFirst(4) {
        let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
        store!.set(parts.count == 2 ? parts[1] : "", forKey: parts[0])
    }
    let start = DispatchTime.now()
    store = nil   // the last reference: the store's deinit runs here
    say("released \((DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1_000_000)")
    exit(0)
case "release-on-loop":
    // The race of a store released while an event loop uses it (handling the host's answer):
    // its deinit runs there, and its last writes can only leave that loop after it returns.
    final class Holder: @unchecked Sendable {
        // Set by this thread before the loops go on, then only touched by loop 0's task.
        var store: UbiquitousKeyValueStore?
    }
    let holder = Holder()
    var store: UbiquitousKeyValueStore? = open()
    say("opened \(store!.internals.isAttached ? "attached" : "host")")
    // Every loop of the group (so the connection's is among them) waits until the writes are
    // queued behind it, and stays busy from the deinit on until after this process began to exit.
    let loops = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())
    let (started, go, dropped) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
    for (index, loop) in loops.enumerated() {
        loop.execute {
            started.signal()
            go.wait()
            if index == 0 {
                holder.store = nil   // the last reference: the deinit runs here
                dropped.signal()
            }
            usleep(300_000)
        }
    }
    for _ in loops { started.wait() }
    for pair in arguments.dropFirst(4) {
        let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
        store!.set(parts.count == 2 ? parts[1] : "", forKey: parts[0])
    }
    holder.store = store
    weak let released = store
    store = nil
    for _ in loops { go.signal() }
    dropped.wait()
    usleep(50_000)
    say("exiting \(released == nil ? "released" : "still held")")
    exit(0)
case "share":
    guard arguments.count == 7, let count = Int(arguments[5]) else { exit(64) }
    let (name, other) = (arguments[4], arguments[6])
    let store = open()
    Shown.notifications(of: store)
    say("opened \(store.internals.isAttached ? "attached" : "host")")
    // Woken by the store's notifications (the other's writes arriving), for at most 30 s in all.
    let arrived = DispatchSemaphore(value: 0)
    let observer = NotificationCenter.default.addObserver(forName: UbiquitousKeyValueStore.didChangeExternallyNotification, object: store, queue: nil) { _ in
        arrived.signal()
    }
    let until = DispatchTime.now() + .seconds(30)
    func seen(_ key: String) -> Bool {
        while store.object(forKey: key) == nil, arrived.wait(timeout: until) == .success {}
        return store.object(forKey: key) != nil
    }
    waitForFile(arguments[2] + "/go")
    // In step: write i goes after the other's write i − 1 arrived, so the two processes'
    // writes interleave however the machine schedules them.
    for i in 1...count {
        if i > 1 { _ = seen("\(other)-\(i - 1)") }
        store.set(Int64(i), forKey: "\(name)-\(i)")
    }
    let saw = seen("\(other)-\(count)")
    NotificationCenter.default.removeObserver(observer)
    say("saw \(saw)")
    say("synced \(store.synchronize())")
    // Should we host, the other sees our last writes through us: stay until it says it has.
    _ = FileManager.default.createFile(atPath: arguments[2] + "/saw-\(name)", contents: nil)
    waitForFile(arguments[2] + "/saw-\(other)")
    exit(0)
case "watch":
    guard arguments.count == 5 else { exit(64) }
    let key = arguments[4]
    let store = open()
    Shown.notifications(of: store) { Shown.value(key, in: store) }
    say("opened \(store.internals.isAttached ? "attached" : "host") \(Shown.value(key, in: store))")
    while true { pause() }
case "count":
    guard arguments.count == 7, let count = Int(arguments[5]), let interval = UInt32(arguments[6]) else { exit(64) }
    let name = arguments[4]
    let store = open()
    say("opened \(store.internals.isAttached ? "attached" : "host")")
    // HEARTH_TEST_PAUSE=N:FILE: after write N, wait until FILE exists (so that a test can kill
    // the host while this process is surely still writing, however loaded the machine).
    let pause = environment["HEARTH_TEST_PAUSE"].map { $0.split(separator: ":", maxSplits: 1).map(String.init) }
    for i in 1...count {
        store.set(Int64(i), forKey: "\(name)-\(i)")
        if i % 10 == 0 { say("wrote \(i)") }
        if let pause, pause.count == 2, Int(pause[0]) == i {
            say("paused \(i)")
            waitForFile(pause[1])
        }
        usleep(interval * 1000)
    }
    say("done \(count) \(store.synchronize())")
    say("still \(store.internals.isAttached ? "attached" : "host")")
    exit(0)
default:
    say("unknown mode \(arguments[1])")
    exit(64)
}
