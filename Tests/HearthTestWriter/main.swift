// A child process for the persistence tests (Tests/HearthTests/CrashSafetyTests.swift).
//
//   hearth-test-writer loop DIR STORE       write forever; print "confirmed N" after each
//                                           synchronize() that returned true
//   hearth-test-writer hold DIR STORE       open the store, print "opened" or "error CODE: …",
//                                           then hold it until killed
//   hearth-test-writer put DIR STORE K=V…   write string values and exit without synchronize()
import Foundation
import Hearth

/// Unbuffered, so the parent sees each line even when this process is killed.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
let arguments = CommandLine.arguments
guard arguments.count >= 4 else {
    FileHandle.standardError.write(Data("usage: hearth-test-writer loop|hold|put DIR STORE [K=V…]\n".utf8))
    exit(64)
}
let configuration = UbiquitousKeyValueStore.Configuration(dataDirectory: arguments[2])

func open() -> UbiquitousKeyValueStore {
    do {
        return try UbiquitousKeyValueStore(storeIdentifier: arguments[3], configuration: configuration)
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
    let store = open()
    say("opened \(store.storeIdentifier)")
    while true { pause() }
case "put":
    let store = open()
    for pair in arguments.dropFirst(4) {
        let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
        store.set(parts.count == 2 ? parts[1] : "", forKey: parts[0])
    }
    exit(0)
default:
    say("unknown mode \(arguments[1])")
    exit(64)
}
