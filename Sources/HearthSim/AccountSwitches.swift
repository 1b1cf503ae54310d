import Foundation
import Hearth
import HearthCore
import HearthIdentity
import HearthSync
import Logging

/// Account switches (docs/simulator.md, "Account switches"): a device of the household leaves
/// for a second account (its own data, no other device), its app writes there, and it comes
/// back. Each switch goes through the product's decision of what the local set becomes and
/// what the app is told (`AccountSwitch.replace`, `StoreSync.switchAccount`'s), with its sync
/// stopped and its stores saved first, as the product does; on its way back the device opens
/// the household's file again (a new replica ID, as every run of a store) and syncs.
///
/// Its own type because a device's second account is one concern, apart from running the
/// devices and the workload (``Household``): it holds the other account and its devices' stores,
/// draws the writes made there, and checks at the end that none reached the household; the
/// household powers the devices (``DevicePower``).
final class AccountSwitches: Sendable {
    private struct State {
        var keys: SplitMix64
        var authority: AccountAuthority?
        /// Each device's identity in the other account, made at its first switch.
        var identities: [Int: DeviceIdentity] = [:]
        /// The devices on the other account now, with their stores.
        var away: [Int: [String: SimulatedStore]] = [:]
    }

    private let state: Locked<State>
    /// The virtual wall clock's start, which certificates are dated around.
    private let start: Date

    /// The signature scheme of the run (the household's: docs/simulator.md, "Signatures").
    private let signatures: EntrySignatures.Scheme

    private let settings: Household.Settings
    private let members: [Household.Member]
    private let lan: SimulatedLAN
    private let trace: Trace
    private let executor: SimulationExecutor
    private let checker: Checker
    private let draws: Draws
    private let logger: Logger

    init(seed: UInt64, start: Date, settings: Household.Settings, members: [Household.Member], lan: SimulatedLAN, trace: Trace,
         executor: SimulationExecutor, checker: Checker, draws: Draws, logger: Logger) {
        self.signatures = settings.signatures
        (self.settings, self.members, self.lan, self.trace) = (settings, members, lan, trace)
        (self.executor, self.checker, self.draws, self.logger) = (executor, checker, draws, logger)
        // A stream of its own: the household's keys and draws stay as they were.
        state = Locked(State(keys: SplitMix64(seed: seed ^ 0xACC0_0B5E_ED00_0002)))
        self.start = start
    }

    /// `device`'s identity in the other account (its own key, its certificate from the other
    /// account's authority, all from the seed).
    func identity(of device: Int) throws -> DeviceIdentity {
        try state.withLock { s in
            if let known = s.identities[device] { return known }
            func key() throws -> Ed25519PrivateKey {
                try Ed25519PrivateKey(rawRepresentation: (0..<4).flatMap { _ in withUnsafeBytes(of: s.keys.next()) { Array($0) } })
            }
            let (notBefore, notAfter) = (start.addingTimeInterval(-86_400), start.addingTimeInterval(5 * 365 * 86_400))
            if s.authority == nil {
                let caKey = try key()
                let ca = try CertificateIssuer.issue(kind: .authority, commonName: "Another account", publicKey: caKey.publicKey,
                                                     issuer: nil, signingKey: caKey, notBefore: notBefore, notAfter: notAfter)
                s.authority = try AccountAuthority(account: Account(caCertificate: ca), privateKey: caKey)
            }
            let deviceKey = try key()
            let certificate = try s.authority!.issueDeviceCertificate(for: deviceKey.publicKey, deviceName: "d\(device) (b)",
                                                                      notBefore: notBefore, notAfter: notAfter)
            let identity = try DeviceIdentity(account: s.authority!.account, privateKey: deviceKey, certificate: certificate,
                                              signatures: signatures)
            s.identities[device] = identity
            return identity
        }
    }

    func leave(_ device: Int, stores: [String: SimulatedStore]) { state.withLock { $0.away[device] = stores } }
    func isAway(_ device: Int) -> Bool { state.withLock { $0.away[device] != nil } }
    func comeBack(_ device: Int) -> [String: SimulatedStore]? { state.withLock { $0.away.removeValue(forKey: device) } }
    var awayDevices: [Int] { state.withLock { $0.away.keys.sorted() } }

    /// Whether switches are drawn (and apps check their notifications): not with clock jumps
    /// nor a hostile member, whose seeds replay as they were (findings 2-8).
    static func switchesAccounts(_ settings: Household.Settings) -> Bool {
        settings.accountSwitches && !settings.clockFaults && !settings.hostile
    }

    /// The value of a write under the other account: marked, so that a household replica
    /// holding one shows it (``AccountChecks/checkHousehold(_:device:store:when:)``).
    static func otherAccountValue(_ n: Int) -> PropertyListValue { .string("other-account \(n)") }

    static func isOtherAccountValue(_ value: PropertyListValue?) -> Bool {
        if case .string(let text)? = value { text.hasPrefix("other-account ") } else { false }
    }

    /// The app of a store of a run of `member` (none without account switches).
    func makeApp(_ member: Household.Member, store: String) -> SimulatedApp? {
        Self.switchesAccounts(settings) && !member.hostile
            ? SimulatedApp(device: member.index, storeIdentifier: store, executor: executor, checker: checker, trace: trace) : nil
    }

    /// `member` switches to the other account for `away`; its app writes there 1 to 4 times meanwhile.
    func switchAccount(_ member: Household.Member, away: Duration, power: DevicePower) async {
        guard let run = member.run.withLock({ s in defer { s = nil }; return s }) else { return }
        let index = member.index
        trace.log("d\(index) switches to another account for \(away)")
        // Off the household's LAN: its engines would no longer admit it.
        lan.setDown(index, true)
        // What the product's switch does first: sync stopped (a barrier), the store saved.
        await run.engine.stop()
        for name in settings.stores { run.stores[name]?.save() }
        do {
            try move(run.stores, of: member, to: identity(of: index), power: power, checkedAs: { "\($0) (other account)" })
        } catch {
            checker.fail("account switch", "d\(index) could not switch: \(error)")
        }
        leave(index, stores: run.stores)
        for _ in 0..<(1 + draws.draw(below: 4)) {
            let at = draws.duration(0...Double(away.components.seconds))
            let store = settings.stores[draws.draw(below: settings.stores.count)]
            let key = StoreKey("k\(draws.draw(below: settings.keys))")
            let value: PropertyListValue? = draws.draw(below: 5) == 0 ? nil : Self.otherAccountValue(draws.draw(below: 1_000_000))
            executor.after(at) { [self] in
                // Not once it is back (the end of the workload brings it back early).
                guard isAway(index) else { return }
                run.stores[store]?.write(value, forKey: key)
            }
        }
        executor.after(away) { [self] in Task { await switchBack(member, power: power) } }
    }

    /// `member` comes back to the household's account (if it is away): its stores saved, the
    /// household's files opened again, its engine started.
    func switchBack(_ member: Household.Member, power: DevicePower) async {
        guard let stores = comeBack(member.index) else { return }
        trace.log("d\(member.index) switches back")
        for name in settings.stores { stores[name]?.save() }
        do {
            try move(stores, of: member, to: member.identity, power: power, checkedAs: { $0 })
            lan.setDown(member.index, false)
            try await power.startEngine(member, stores)
        } catch {
            checker.fail("account switch", "d\(member.index) could not switch back: \(error)")
        }
    }

    /// Every device still away comes back (the end of the workload).
    func switchBackAll(power: DevicePower) async {
        for index in awayDevices { await switchBack(members[index], power: power) }
    }

    /// Opens each store's file of `identity`'s account on the device's disk (a new replica ID
    /// from the device's source, as the product's switch does) and switches the store to it.
    private func move(_ stores: [String: SimulatedStore], of member: Household.Member, to identity: DeviceIdentity, power: DevicePower,
                      checkedAs: (String) -> String) throws {
        // Planted (`same-replica-id`): every run of a store under its first run's IDs, as at a restart.
        let ids = settings.plant == .sameReplicaID ? Locked(SplitMix64(seed: UInt64(member.index))) : member.ids
        for name in settings.stores {
            guard let store = stores[name] else { continue }
            let location = StoreLocation(dataDirectory: "/sim/d\(member.index)", storeIdentifier: name, account: identity.account.id.hex)
            let (storage, opened) = try ReplicaStorage.open(location, on: member.disk, device: identity.deviceID.data, logger: logger,
                                                            wall: power.wall(member), random: { ids.withLock { $0.next() } })
            store.switchAccount(to: storage, opened: opened, device: identity.deviceID.data, checkedAs: checkedAs(name), logger: logger)
        }
    }

    /// At quiescence: no household replica holds what was written under the other account, and
    /// every app was told all it was owed (then the apps end).
    func checkAccounts(_ replicas: [String: [(device: Int, replica: Replica)]]) {
        for (store, holders) in replicas.sorted(by: { $0.key < $1.key }) {
            for (device, replica) in holders where !members[device].hostile {
                checker.accounts.checkHousehold(replica.entries.values, device: device, store: store, when: "at the end")
            }
        }
        for member in members {
            guard let run = member.run.withLock({ $0 }) else { continue }
            for name in settings.stores { run.stores[name]?.app?.checkDelivered() }
        }
    }
}

extension HouseholdFaults {
    /// One kind of fault for account switches, drawn after every other kind.
    var accountSwitchKinds: Int { AccountSwitches.switchesAccounts(settings) ? 1 : 0 }

    /// An account switch of a device that is up, away for 10 s to 10 min.
    func accountSwitch() -> DrawnFault? {
        let up = members.filter { !$0.hostile && $0.run.withLock { $0 != nil } }
        guard !up.isEmpty else { return nil }
        return .accountSwitch(up[draws.draw(below: up.count)], away: draws.duration(10...600))
    }
}

/// A fault drawn that the household makes (``HouseholdFaults/fault()``): it powers and runs its devices.
enum DrawnFault {
    case crash(Household.Member, down: Duration)
    case removal(HouseholdRemovals.Removal)
    case accountSwitch(Household.Member, away: Duration)
}
