import Foundation
import HearthCore
import HearthSync

/// The hostile member (`--hostile`): the household's last device, with its valid keys, running
/// the production engine over ``HostileStore``s. Its acts are drawn with the workload.
extension Household {
    /// The hostile member's acts per simulated hour.
    static let hostileActsPerHour = 12.0

    /// Starts the hostile member's engine over its lying stores (nothing of it is saved: its
    /// floods and what it remembers go with a crash).
    func startHostile(_ member: Member, environment: SyncEnvironment) async {
        let wall = wall(of: member)
        var stores: [String: HostileStore] = [:]
        do {
            for name in settings.stores {
                let replica = Replica(id: ReplicaID.random(boundTo: member.identity.deviceID.data) { member.ids.withLock { $0.next() } })
                stores[name] = HostileStore(storeIdentifier: name, replica: replica,
                                            prefix: ReplicaID.devicePrefix(of: member.identity.deviceID.data), wall: wall,
                                            seed: member.ids.withLock { $0.next() })
            }
            let engine = try SyncEngine(identity: member.identity, options: .init(host: "memory", port: member.port),
                                        environment: environment, logger: logger)
            for name in settings.stores { _ = try engine.attach(stores[name]!) }
            try await engine.start()
            member.run.withLock { $0 = Run(engine: engine, stores: [:], hostile: stores) }
            trace.log("d\(member.index) up (hostile)")
        } catch {
            checker.fail("start", "the hostile d\(member.index) could not start: \(error)")
        }
    }

    /// One act of the hostile member, if it is up: a way of lying (or none) for a while, or a flood.
    func hostileAct() {
        guard let member = members.last, member.hostile, let stores = member.run.withLock({ $0?.hostile }), !stores.isEmpty else { return }
        let acts = HostileStore.Act.allCases
        let choice = draws.draw(below: acts.count + 2)
        let name = settings.stores[draws.draw(below: settings.stores.count)]
        switch choice {
        case acts.count:
            // Up to past the 2,048 origins one device may have with entries in a store.
            let count = 500 + draws.draw(below: 2000)
            trace.log("d\(member.index) (hostile) floods \(name) with \(count) origins")
            stores[name]!.flood(count, newOrigins: true, valueBytes: 16)
        case acts.count + 1:
            // Up to past a signer's share of a store (2,048 keys, 2 MB) in one flood.
            let count = 1000 + draws.draw(below: 2000)
            trace.log("d\(member.index) (hostile) floods \(name) with \(count) keys of 800 bytes")
            stores[name]!.flood(count, newOrigins: false, valueBytes: 800)
        default:
            let act = acts[choice]
            trace.log("d\(member.index) (hostile) now \(act.rawValue)")
            for store in stores.values { store.act(act) }
        }
    }
}
