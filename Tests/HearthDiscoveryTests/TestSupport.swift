import Foundation
import HearthCore
import HearthDiscovery
import HearthTestSupport
import Synchronization
import Testing

/// Where the discovery tests run and what they may use.
enum TestNet {
    /// Set by scripts/testnet/run.sh: a private avahi-daemon is reachable.
    static let isEnabled = ProcessInfo.processInfo.environment["HEARTH_TESTNET"] == "1"
    static let isRoot = getuid() == 0
    static let skipReason: Comment =
        "needs the test network: scripts/testnet/up.sh && scripts/testnet/run.sh swift test --skip-build"

    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func script(_ name: String) -> String {
        repositoryRoot.appendingPathComponent("scripts/testnet/\(name)").path
    }

    /// The probe built next to this test binary (swift build --build-tests builds it too).
    static var probePath: String? { ChildProcess.builtProduct("hearth-discovery-probe") }
}

/// Random hashes, so concurrent tests (and leftovers) on the shared daemon never mix.
func randomHash() -> String {
    String(format: "%016llx", UInt64.random(in: 1...UInt64.max))
}

/// A service of a fresh account and store unless given.
func makeService(_ name: String, port: UInt16, account: String = randomHash(), store: String = randomHash(),
                 device: String = randomHash()) -> ServiceDescription {
    ServiceDescription(instanceName: name, port: port, protocolVersion: 1,
                       accountHash: account, storeHash: store, deviceHash: device)
}

/// Follows a discovery's events in the background so tests can wait for conditions.
final class EventRecorder: Sendable {
    private final class Storage: Sendable {
        let events = Mutex<[PeerEvent]>([])
        /// Signalled at each event: what ``wait(upTo:until:)`` wakes on.
        let arrived = ChangeSignal()
    }

    private let storage = Storage()
    private let task: Task<Void, Never>

    init(_ discovery: any PeerDiscovery) {
        let stream = discovery.events()
        task = Task { [storage] in
            for await event in stream {
                storage.events.withLock { $0.append(event) }
                storage.arrived.signal()
            }
        }
    }

    deinit { task.cancel() }

    var all: [PeerEvent] { storage.events.withLock { $0 } }

    /// Waits until `condition` holds over the events so far; returns how long it took, or nil.
    @discardableResult
    func wait(upTo timeout: Duration = .seconds(5), until condition: ([PeerEvent]) -> Bool) async -> Duration? {
        let start = ContinuousClock.now
        let held = await ChangeSignal.waitUntil(start + timeout, observing: { [storage.arrived] }) { condition(all) }
        return held ? ContinuousClock.now - start : nil
    }

    /// The current peers implied by the events (by id).
    var present: [String: DiscoveredPeer] {
        var peers: [String: DiscoveredPeer] = [:]
        for event in all {
            switch event {
            case .appeared(let peer), .updated(let peer): peers[peer.id] = peer
            case .gone(let peer): peers[peer.id] = nil
            }
        }
        return peers
    }

    func peer(named name: String) -> DiscoveredPeer? { present.values.first { $0.name == name } }

    func saw(named name: String) -> Bool { all.contains { $0.peer.name == name } }
}

