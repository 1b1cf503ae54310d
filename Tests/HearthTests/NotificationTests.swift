import Foundation
import Hearth
import HearthCore
import Synchronization
import Testing

/// Observes `didChangeExternallyNotification` for one store through NotificationCenter.
final class NotificationProbe: Sendable {
    struct Note: Sendable, Equatable {
        var reason: Int?
        var keys: [String]?
    }

    private let notes = Mutex<[Note]>([])
    /// Signalled at each note: what ``first(timeout:)`` waits on.
    private let arrivals = ChangeSignal()
    // The observer token is only handed back to NotificationCenter in deinit.
    nonisolated(unsafe) private var token: (any NSObjectProtocol)?

    init(store: UbiquitousKeyValueStore) {
        token = NotificationCenter.default.addObserver(
            forName: NSUbiquitousKeyValueStore.didChangeExternallyNotification, object: store, queue: nil
        ) { [weak self] note in
            let reason = note.userInfo?[NSUbiquitousKeyValueStoreChangeReasonKey] as? Int
            let keys = note.userInfo?[NSUbiquitousKeyValueStoreChangedKeysKey] as? [String]
            self?.notes.withLock { $0.append(Note(reason: reason, keys: keys)) }
            self?.arrivals.signal()
        }
    }

    deinit {
        if let token { NotificationCenter.default.removeObserver(token) }
    }

    var all: [Note] { notes.withLock { $0 } }

    /// The first note, waiting up to `timeout` for it.
    func first(timeout: Duration = .seconds(30)) async -> Note? {
        _ = await ChangeSignal.waitUntil(ContinuousClock.now + timeout, observing: { [arrivals] }) { !all.isEmpty }
        return all.first
    }
}

@Suite("Change notifications")
struct NotificationTests {
    @Test("The app's own writes never post a notification")
    func ownWritesAreSilent() async throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        let probe = NotificationProbe(store: t.store)
        let recorder = ChangeRecorder(t.store, count: 1)
        t.store.set("a", forKey: "k")
        t.store.set(Int64(2), forKey: "n")
        t.store.removeObject(forKey: "k")
        try t.store.setValue(true, forKey: "b")
        #expect(t.store.synchronize())
        #expect(await recorder.events(timeout: .milliseconds(400)).isEmpty)
        #expect(probe.all.isEmpty)
    }

    @Test("An external batch posts once, with the reason and exactly the keys whose value changed")
    func externalBatch() async throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        t.store.set("same", forKey: "unchanged")
        var peer = FakePeer()
        let batch = [peer.write("x", forKey: "a"), peer.write("same", forKey: "unchanged"),
                     peer.write(1, forKey: "b"), peer.write(nil, forKey: "b")]
        let probe = NotificationProbe(store: t.store)
        let recorder = ChangeRecorder(t.store, count: 2)
        let changed = t.store.internals.applyExternal(batch, coveredBy: peer.replica.vector)
        #expect(changed == ["a"])
        let note = try #require(await probe.first())
        #expect(note == .init(reason: NSUbiquitousKeyValueStoreServerChange, keys: ["a"]))
        t.store.internals.applyExternal([peer.write("y", forKey: "c"), peer.write("z", forKey: "a")], reason: .initialSyncChange)
        let events = await recorder.events()
        #expect(events == [ChangeEvent(reason: .serverChange, keys: ["a"]), ChangeEvent(reason: .initialSyncChange, keys: ["c", "a"])])
        #expect(probe.all.count == 2)
        #expect(t.store.string(forKey: "a") == "z")
    }

    @Test("A batch that changes nothing visible posts nothing")
    func silentBatch() async throws {
        let t = try TemporaryStore()
        defer { t.cleanUp() }
        var peer = FakePeer()
        let recorder = ChangeRecorder(t.store, count: 1)
        t.store.internals.applyExternal([peer.write(1, forKey: "k"), peer.write(nil, forKey: "k")])
        #expect(await recorder.events(timeout: .milliseconds(300)).isEmpty)
    }

    @Test("Notifications name the store instance, so observers of another store hear nothing")
    func objectFilter() async throws {
        let t = try TemporaryStore(), u = try TemporaryStore(identifier: "com.example.other")
        defer { t.cleanUp(); u.cleanUp() }
        let otherProbe = NotificationProbe(store: u.store)
        let probe = NotificationProbe(store: t.store)
        var peer = FakePeer()
        t.store.internals.applyExternal([peer.write(1, forKey: "k")])
        #expect(await probe.first() != nil)
        #expect(otherProbe.all.isEmpty)
    }
}
