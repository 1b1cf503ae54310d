import Foundation
import Hearth
import HearthTestSupport
import HearthTesting
import Testing

// The first test is quoted, between the doc markers, in Sources/HearthTesting/HearthTesting.docc/TestingYourApp.md; the last
// test checks that the two stay identical.

// doc:begin
@Test func colourReachesEveryDevice() async throws {
    // Three devices of one throwaway account, syncing over 127.0.0.1.
    try await withLoopbackCluster(replicas: 3, storeIdentifier: "com.example.colors") { cluster in
        // The app's code runs on device 1, on the same store as the cluster's replica 1.
        let app = try UbiquitousKeyValueStore(storeIdentifier: cluster.storeIdentifier,
                                              configuration: cluster.configuration(for: 1))
        let mirror = UserDefaultsMirror(store: app, suiteName: "loopback-test-\(UUID())", keys: ["backgroundColor"])

        // Another device picks a colour; every device gets it, device 1 as a serverChange.
        try cluster[0].setValue(2, forKey: "backgroundColor")
        try await cluster.waitUntilConverged(expected: ["backgroundColor": 2])
        let change = try await cluster.nextNotification(on: 1, reason: .serverChange)
        #expect(change.keys == ["backgroundColor"])
        #expect(app.longLong(forKey: "backgroundColor") == 2)

        // Device 2 is offline while both it and device 0 change the colour: the later write wins.
        await cluster.isolate(2)
        try cluster[2].setValue(1, forKey: "backgroundColor")
        await cluster[2].pastStamp(of: "backgroundColor")
        try cluster[0].setValue(3, forKey: "backgroundColor")
        try await cluster.heal()
        try await cluster.waitUntilConverged(expected: ["backgroundColor": 3])

        // Device 1 quits and starts again: it keeps the value and still syncs.
        mirror.stop()
        try await cluster.restart(1)
        #expect(cluster[1].value(forKey: "backgroundColor") == 3)
        try cluster[1].setValue(0, forKey: "backgroundColor")
        try await cluster.waitUntilConverged(expected: ["backgroundColor": 0])
    }
}
// doc:end

@Test func mirrorCopiesExternalChangesIntoUserDefaults() async throws {
    try await withLoopbackCluster(replicas: 2, storeIdentifier: "com.example.mirror") { cluster in
        let suite = "loopback-mirror-\(UUID())"
        let mirror = UserDefaultsMirror(store: cluster[1], suiteName: suite, keys: ["backgroundColor"])
        try cluster.write(.integer(3), forKey: "backgroundColor", on: 0)
        _ = try await cluster.nextNotification(on: 1, reason: .serverChange)
        // The mirror copies on the same notification, in its own task, and saves the suite
        // (Foundation on Linux posts no UserDefaults.didChangeNotification): its file written is the event.
        let file = defaultsFile(ofSuite: suite)
        await untilFilesChange([file], "the mirror's copy on disk", names: { $0 == (file as NSString).lastPathComponent }) {
            mirror.defaults.integer(forKey: "backgroundColor") == 3
        }
        mirror.stop()
    }
}

@Test func removalsAndRestartsKeepEveryReplicaEqual() async throws {
    try await withLoopbackCluster(replicas: 3, storeIdentifier: "com.example.removals") { cluster in
        try cluster.write("milk", forKey: "item-1", on: 0)
        try cluster.write("eggs", forKey: "item-2", on: 1)
        try await cluster.waitUntilConverged(expected: ["item-1": "milk", "item-2": "eggs"])

        // A replica that was down misses a removal and catches up when it comes back.
        await cluster.isolate(2)
        try cluster.write(nil, forKey: "item-1", on: 0)
        try await cluster.waitUntilConverged([0, 1], expected: ["item-2": "eggs"])
        #expect(cluster[2].value(forKey: "item-1") == "milk")
        try await cluster.restart(2)
        try await cluster.waitUntilConverged(expected: ["item-2": "eggs"])
        #expect(cluster.notifications(of: 2).contains { $0.keys.contains("item-1") })
    }
}

@Test func waitingTooLongSaysWhatEachReplicaHolds() async throws {
    try await withLoopbackCluster(replicas: 2, storeIdentifier: "com.example.timeout") { cluster in
        await cluster.isolate(1)
        try cluster.write(1, forKey: "only-here", on: 0)
        let error = await #expect(throws: LoopbackClusterError.self) {
            try await cluster.waitUntilConverged([0, 1], timeout: .milliseconds(300))
        }
        #expect(error?.code == .timedOut)
        #expect(error?.description.contains("only-here") == true)
    }
}

/// A replica whose vector covers an entry it never got is never sent it again (a divergence for
/// good): the failed wait names it, with each replica's vector.
@Test func waitingTooLongNamesAReplicaCoveringWhatItLacks() async throws {
    try await withLoopbackCluster(replicas: 2, storeIdentifier: "com.example.covered") { cluster in
        await cluster.isolate(1)
        try cluster.write(1, forKey: "only-here", on: 0)
        try cluster.write(2, forKey: "both", on: 0)
        // Replica 1 gets the later entry, and a vector over both (its origin then owns an entry: the counter stays).
        let writer = cluster[0].internals.replica
        cluster[1].internals.applyExternal(writer.entries.values.filter { $0.key == "both" }, coveredBy: writer.vector)
        let error = await #expect(throws: LoopbackClusterError.self) {
            try await cluster.waitUntilConverged([0, 1], timeout: .milliseconds(300))
        }
        #expect(error?.description.contains("covered but not held by replicas 1") == true, "\(error.map { "\($0)" } ?? "")")
        #expect(error?.description.contains("replica 1 (origin") == true)
    }
}

@Test func guideQuotesTheFirstTestExactly() throws {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
    let guide = try String(contentsOf: root.appendingPathComponent("Sources/HearthTesting/HearthTesting.docc/TestingYourApp.md"), encoding: .utf8)
    let begin = try #require(source.range(of: "// doc:begin\n"))
    let end = try #require(source.range(of: "// doc:end"))
    let quoted = String(source[begin.upperBound..<end.lowerBound])
    #expect(guide.contains(quoted), "Sources/HearthTesting/HearthTesting.docc/TestingYourApp.md must quote the test between the doc markers verbatim")
}
