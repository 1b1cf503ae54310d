import Foundation
import HearthCore
import HearthIdentity
@testable import HearthSync

/// What a mesh of engines on in-memory links holds when it did not converge: per device, its
/// vector, held-back entries and known peers' acknowledged vectors; per session, what its state
/// thinks the peer has and owes it; and, for each key on which devices differ, each device's
/// entry. Origins are named by their device's index (`d3`), so a dump reads without IDs.
enum MeshDiagnostics {
    static func dump(replicas: [MemoryReplica], engines: [SyncEngine]) async -> String {
        let states = replicas.map(\.replica)
        var names: [ReplicaID: String] = [:]
        for (index, replica) in states.enumerated() { names[replica.id] = "d\(index)" }
        var devices: [DeviceID: String] = [:]
        for (index, engine) in engines.enumerated() { devices[engine.identity.deviceID] = "d\(index)" }
        func v(_ vector: VersionVector?) -> String {
            guard let vector else { return "nil" }
            return "{" + vector.counters.map { (names[$0.key] ?? "?\($0.key)", $0.value) }.sorted { $0.0 < $1.0 }
                .map { "\($0.0):\($0.1)" }.joined(separator: " ") + "}"
        }
        func e(_ entry: Entry?) -> String {
            guard let entry else { return "absent" }
            return "\(entry.isTombstone ? "tomb" : "set")@\(entry.timestamp.milliseconds - InMemoryMeshTests.t0)#\(names[entry.origin] ?? "?"):\(entry.sequence)"
        }
        var lines = ["--- mesh did not converge ---"]
        for (index, replica) in states.enumerated() {
            lines.append("d\(index): vector \(v(replica.vector)) retired \(replica.retiredOrigins.map { names[$0] ?? "?" }.sorted())")
            let held = replicas[index].heldBack
            if !held.isEmpty { lines.append("  held back: \(held.values.map { e($0) })") }
            for (peer, acknowledged) in replica.peerVectors.sorted(by: { $0.key < $1.key }) {
                let name = DeviceID(hex: peer).flatMap { devices[$0] } ?? peer
                lines.append("  known \(name): acknowledged \(v(acknowledged))")
            }
            let sessions = engines[index].state.withLock { $0.sessions.sessions }
            var views: [(peer: String, state: SyncSession.State)] = []
            for session in sessions { views.append((devices[await session.peer.deviceID] ?? "?", await session.state)) }
            for (peer, s) in views.sorted(by: { $0.peer < $1.peer }) {
                lines.append("  session to \(peer): greeted \(s.greeted) closed \(s.closed) peerLinks \(s.peerLinks.map { devices[$0] ?? "?" }.sorted()) mailbox empty \(s.mailbox.isEmpty)")
                for (name, shared) in s.shared {
                    lines.append("    \(name): ready \(shared.ready) relaying \(shared.relaying) peerKnown \(v(shared.peerKnown)) acknowledged \(v(shared.acknowledged)) deferred \(v(shared.deferred)) told \(v(shared.told)) unknownClaims \(v(shared.unknownClaims))")
                }
            }
        }
        // Keys whose live entry differs between devices.
        let keys = Set(states.flatMap(\.entries.keys)).sorted()
        for key in keys {
            let mine = states.map { $0.entries[key] }
            let live = mine.map { $0.flatMap { $0.isTombstone ? nil : $0.timestamp } }
            guard Set(live.map { $0.map { "\($0)" } ?? "-" }).count > 1 else { continue }
            lines.append("key \(key): " + mine.enumerated().map { "d\($0.offset) \(e($0.element))" }.joined(separator: ", "))
        }
        return lines.joined(separator: "\n")
    }
}
