import HearthDiscovery
import HearthTesting
import Logging
import Testing
import HearthTestSupport

extension AvahiTestNet {
    @Suite("Two publishers find each other")
    struct TwoPublishersTests {
        @Test("see each other within 2 s with addresses, port and TXT; a stopped one is gone; other accounts and stores are ignored")
        func seeEachOther() async throws {
            let account = randomHash(), store = randomHash()
            let logs = LogCapture()
            let a = AvahiDiscovery(service: makeService("Alpha-\(account.prefix(6))", port: 7101, account: account, store: store), logger: logs.logger("A"))
            let b = AvahiDiscovery(service: makeService("Beta-\(account.prefix(6))", port: 7102, account: account, store: store), logger: logs.logger("B"))
            let otherAccount = AvahiDiscovery(service: makeService("Other-account-\(account.prefix(6))", port: 7103, store: store), logger: Logger(label: "test"))
            let otherStore = AvahiDiscovery(service: makeService("Other-store-\(account.prefix(6))", port: 7104, account: account), logger: Logger(label: "test"))
            let recordA = EventRecorder(a), recordB = EventRecorder(b)

            try await otherAccount.start()
            try await otherStore.start()
            let clock = ContinuousClock()
            let started = clock.now
            try await a.start()
            try await b.start()

            // Seen with its loopback address: a service resolved on two interfaces (or one address
            // record late, on a loaded machine) shows in an update right after its first sighting.
            let aSeesB = await recordA.wait(upTo: .seconds(2)) { _ in
                recordA.peer(named: b.service.instanceName)?.addresses.contains { $0.host == "127.0.0.1" && $0.family == .ipv4 } == true
            }
            let bSeesA = await recordB.wait(upTo: .seconds(2)) { _ in recordB.peer(named: a.service.instanceName) != nil }
            let latency = clock.now - started
            print("discovery latency (start of both to mutual sighting): \(latency)")
            #expect(aSeesB != nil, "A did not see B within 2 s")
            #expect(bSeesA != nil, "B did not see A within 2 s")
            #expect(latency < .seconds(2))

            let peerB = try #require(recordA.peer(named: b.service.instanceName))
            #expect(peerB.port == 7102)
            #expect(peerB.addresses.contains { $0.host == "127.0.0.1" && $0.family == .ipv4 }, "\(peerB.addresses)")
            #expect(peerB.txt == ["v": "1", "a": account, "s": store, "d": b.service.deviceHash])
            #expect(peerB.record == b.service.record)
            #expect(peerB.id.hasPrefix("mdns:"))

            // The other account's and store's services (started first) reach both, resolved, and
            // are dropped: each says so in its log, and only then is "never reported" shown.
            let foreign = [otherAccount.service.instanceName, otherStore.service.instanceName]
            let dropped = await logs.until(deadline: .seconds(10)) {
                ["A", "B"].allSatisfy { label in
                    foreign.allSatisfy { name in
                        logs.all.contains { $0.label == label && $0.message.hasPrefix("ignoring service \"\(name)\"") }
                    }
                }
            }
            #expect(dropped, "\(logs.all.filter { $0.message.hasPrefix("ignoring") }.map { "\($0.label): \($0.message)" })")
            for recorder in [recordA, recordB] {
                #expect(!recorder.saw(named: otherAccount.service.instanceName))
                #expect(!recorder.saw(named: otherStore.service.instanceName))
            }
            // Never ourselves.
            #expect(!recordA.saw(named: a.service.instanceName))
            #expect(!recordB.saw(named: b.service.instanceName))
            #expect(a.peers.map(\.name) == [b.service.instanceName])

            let stopped = clock.now
            await b.stop()
            let gone = await recordA.wait(upTo: .seconds(5)) { events in
                events.contains { if case .gone(let peer) = $0 { peer.name == b.service.instanceName } else { false } }
            }
            print("gone latency after stop: \(clock.now - stopped)")
            #expect(gone != nil, "A was not told that B is gone")
            #expect(a.peers.isEmpty)

            await a.stop()
            await otherAccount.stop()
            await otherStore.stop()
        }

        @Test("a subscriber that comes late first gets the peers already known")
        func lateSubscriberReplay() async throws {
            let account = randomHash(), store = randomHash()
            let a = AvahiDiscovery(service: makeService("Early-\(account.prefix(6))", port: 7111, account: account, store: store), logger: Logger(label: "test"))
            let b = AvahiDiscovery(service: makeService("Late-\(account.prefix(6))", port: 7112, account: account, store: store), logger: Logger(label: "test"))
            try await a.start()
            try await b.start()
            #expect(await eventually { a.peers.count == 1 })
            let late = EventRecorder(a)
            #expect(await late.wait(upTo: .seconds(1)) { events in
                events.first.map { if case .appeared(let peer) = $0 { peer.name == b.service.instanceName } else { false } } ?? false
            } != nil)
            await b.stop()
            await a.stop()
            // Streams finish when discovery stops.
            var iterator = a.events().makeAsyncIterator()
            #expect(await iterator.next() == nil)
        }
    }
}
