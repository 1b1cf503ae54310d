import Foundation
import Logging
import HearthDiscovery
import HearthTestSupport
import HearthTesting
import Testing

extension AvahiTestNet {
    @Suite("avahi-daemon restarts")
    struct DaemonRestartTests {
        @Test("after a daemon restart the service re-appears and browsing resumes, without restarting the app",
              .enabled(if: TestNet.isRoot, "restarting the namespace's avahi-daemon needs root"))
        func reconnectsAndRepublishes() async throws {
            try await AvahiDaemonGate.exclusively { try await reconnectsAndRepublishesBody() }
        }

        private func reconnectsAndRepublishesBody() async throws {
            let account = randomHash(), store = randomHash(), tag = String(account.prefix(6))
            let logs = LogCapture()
            let a = AvahiDiscovery(service: makeService("Survivor-\(tag)", port: 7501, account: account, store: store),
                                   options: .init(staleGracePeriod: .seconds(3)), logger: logs.logger("test"))
            let b = AvahiDiscovery(service: makeService("Neighbour-\(tag)", port: 7502, account: account, store: store), logger: Logger(label: "test"))
            let recorder = EventRecorder(a)
            try await a.start()
            try await b.start()
            #expect(await eventually { a.peers.map(\.name) == [b.service.instanceName] })

            let clock = ContinuousClock()
            let restart = try await ChildProcess.run(TestNet.script("avahi-restart.sh"), ["0.5"])
            #expect(restart.status == 0, "avahi-restart.sh failed: \(restart.error)")
            let restarted = clock.now

            // The same objects reconnect and re-publish.
            #expect(await eventually(timeout: .seconds(10)) { a.reconnectCount >= 1 && a.isConnected && a.publishedName != nil })
            #expect(await eventually(timeout: .seconds(10)) { b.reconnectCount >= 1 && b.publishedName != nil })
            print("re-published \(clock.now - restarted) after the restart finished")
            #expect(logs.all.contains { $0.message.contains("lost avahi-daemon") })

            // The real daemon lists the service again.
            var listed = false
            for _ in 0..<5 where !listed {
                let browse = try await ChildProcess.run("/usr/bin/avahi-browse", ["-rpt", "_hearth._tcp"])
                listed = browse.output.contains("Survivor-\(tag)")
            }
            #expect(listed, "avahi-browse does not list the service after the restart")

            // Browsing resumed: the neighbour is (again) present, and a newcomer is found.
            #expect(await eventually(timeout: .seconds(10)) { a.peers.map(\.name).contains(b.service.instanceName) })
            let newcomer = AvahiDiscovery(service: makeService("Newcomer-\(tag)", port: 7503, account: account, store: store), logger: Logger(label: "test"))
            try await newcomer.start()
            #expect(await recorder.wait(upTo: .seconds(5)) { _ in recorder.peer(named: newcomer.service.instanceName) != nil } != nil)
            // After the stale grace period (its sweep logs its end) the neighbour must still be
            // there (it was re-seen).
            #expect(await logs.until(deadline: .seconds(20)) { logs.all.contains { $0.message.hasPrefix("grace period after the daemon restart over") } })
            #expect(Set(a.peers.map(\.name)) == [b.service.instanceName, newcomer.service.instanceName])

            await newcomer.stop()
            await b.stop()
            await a.stop()
        }
    
        @Test("while no avahi-daemon runs: start() fails with a clear error, or waits and publishes once it is back",
              .enabled(if: TestNet.isRoot, "restarting the namespace's avahi-daemon needs root"))
        func startWhileDaemonIsDown() async throws {
            try await AvahiDaemonGate.exclusively { try await startWhileDaemonIsDownBody() }
        }

        private func startWhileDaemonIsDownBody() async throws {
            let account = randomHash(), store = randomHash(), tag = String(account.prefix(6))
            let witness = AvahiDiscovery(service: makeService("Witness-\(tag)", port: 7511, account: account, store: store), logger: Logger(label: "test"))
            try await witness.start()
            #expect(await eventually { witness.publishedName != nil })

            // Two seconds without a daemon.
            let restart = try ChildProcess(TestNet.script("avahi-restart.sh"), ["2"])
            #expect(await eventually { !witness.isConnected }, "the daemon never went down")

            let strict = AvahiDiscovery(service: makeService("Strict-\(tag)", port: 7512, account: account, store: store), logger: Logger(label: "test"))
            let error = await #expect(throws: DiscoveryError.self) { try await strict.start() }
            guard let error, error.code == .daemonUnavailable else { Issue.record("wrong error \(String(describing: error))"); return }
            print("start() without a daemon: \(error)")
            #expect(error.reason.contains("avahi-daemon is not running"))

            let patient = AvahiDiscovery(service: makeService("Patient-\(tag)", port: 7513, account: account, store: store),
                                         options: .init(requiresDaemonAtStart: false), logger: Logger(label: "test"))
            try await patient.start()
            #expect(!patient.isConnected)

            #expect(await restart.wait(upTo: .seconds(15)) == 0, "avahi-restart.sh failed: \(restart.errorOutput)")
            #expect(await eventually(timeout: .seconds(10)) { patient.publishedName == "Patient-\(tag)" })
            #expect(await eventually(timeout: .seconds(10)) { patient.peers.map(\.name) == ["Witness-\(tag)"] })
            #expect(await eventually(timeout: .seconds(10)) { witness.peers.map(\.name) == ["Patient-\(tag)"] })
            await patient.stop()
            await witness.stop()
        }
}
}
