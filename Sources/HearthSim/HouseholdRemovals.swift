import Foundation
import HearthCore
import HearthIdentity

/// Device removals (docs/simulator.md, "What a run does"), through the product's path: a record
/// signed by the account CA (`AccountAuthority.removal`, what `hearth device remove` makes)
/// merged into the remover's `DeviceRemovals`, from which its engine spreads it and every engine
/// that learns it refuses the device, its later entries, and drops those it took. The removed
/// device's engine is left as the product runs it (an honest device stops syncing once it holds
/// the record); a thief's copy forgets the record at each start; a device joining again gets a
/// new key and certificate from the CA and keeps its files.
///
/// Its own type because removing and joining again is one concern, apart from running the
/// devices and the workload (``Household``): it holds the account's CA and the keys of devices
/// joining again, and acts on the LAN, the members' removals and the checker; the household
/// powers the devices (``DevicePower``).
final class HouseholdRemovals: Sendable {
    /// A removal drawn among the faults (``HouseholdFaults/drawRemoval()``).
    struct Removal: Sendable {
        let victim: Household.Member
        let remover: Household.Member
        /// A thief's copy goes on: it restores its files copied before the removal at each start.
        let thief: Bool
        /// Devices cut off, with the thief, from the remover's side for `awayFor`.
        let away: [Int]
        let awayFor: Duration
        /// When the thief restores its copy again, after the removal.
        let copyAgain: Duration
        /// When the owner joins the device again with a new key, if they do.
        let rejoinAfter: Duration?
    }

    /// The account's CA: signs removal records and the certificates of devices joining again.
    private let authority: AccountAuthority
    /// The keys of devices joining again (apart from the stream of the first keys, so that a run
    /// without removals draws what it drew before they existed).
    private let rejoinKeys: Locked<SplitMix64>
    /// The certificates' validity.
    private let validity: (notBefore: Date, notAfter: Date)
    private let settings: Household.Settings
    private let lan: SimulatedLAN
    private let trace: Trace
    private let executor: SimulationExecutor
    private let checker: Checker

    init(seed: UInt64, authority: AccountAuthority, validity: (notBefore: Date, notAfter: Date), settings: Household.Settings,
         lan: SimulatedLAN, trace: Trace, executor: SimulationExecutor, checker: Checker) {
        self.authority = authority
        self.validity = validity
        rejoinKeys = Locked(SplitMix64(seed: seed ^ 0x5E70_1E55))
        (self.settings, self.lan, self.trace, self.executor, self.checker) = (settings, lan, trace, executor, checker)
    }

    func remove(_ removal: Removal, power: DevicePower) async {
        let (victim, remover) = (removal.victim, removal.remover)
        let identity = victim.identity
        let at = power.wall(remover)()
        let record: DeviceRemoval
        do {
            record = try authority.removal(of: identity.deviceID, named: "d\(victim.index)", at: Date(timeIntervalSince1970: Double(at) / 1000))
        } catch {
            checker.fail("start", "d\(remover.index) could not sign the removal of d\(victim.index): \(error)")
            return
        }
        victim.removal.withLock { $0 = Household.RemovedDevice(at: record.removedAt, thief: removal.thief) }
        checker.removed(device: victim.index, id: identity.deviceID.hex, prefix: ReplicaID.devicePrefix(of: identity.deviceID.data), at: record.removedAt)
        trace.log("d\(remover.index) removes d\(victim.index) at \(record.removedAt)" + (removal.thief ? " (a thief's copy goes on)" : ""))
        let end = Duration.seconds(settings.hours * 3600)
        if removal.thief {
            if !removal.away.isEmpty {
                // The away devices and the thief on one side, before the record can leave the remover.
                var side = Array(repeating: 0, count: settings.devices)
                for index in removal.away + [victim.index] { side[index] = 1 }
                trace.log("partition \(side.map(String.init).joined()) for \(removal.awayFor) (away during the removal)")
                let number = lan.partition(side)
                executor.after(removal.awayFor) { [lan, trace] in
                    if lan.heal(number) { trace.log("heal") }
                }
            }
            // The thief restores its copy again (a crash and a start: it forgets what it learned).
            executor.after(removal.copyAgain) { [self] in
                guard executor.now < end, victim.identity.deviceID == identity.deviceID else { return }
                Task {
                    trace.log("d\(victim.index) (the thief) restores its copy")
                    await power.crash(victim)
                    executor.after(.seconds(5)) { Task { await power.restart(victim) } }
                }
            }
        }
        // `hearth device remove` on the remover: the record saved, its engine told at once.
        remover.removals.withLock { $0 }.merge([record])
        if let after = removal.rejoinAfter {
            executor.after(after) { [self] in
                guard executor.now < end, victim.identity.deviceID == identity.deviceID else { return }
                Task { await rejoin(victim, power: power) }
            }
        }
    }

    /// The owner joins the removed device again (`hearth account join`, pairing): a new key, a
    /// certificate for it from the CA, the same files. Its app stops cleanly first (its stores
    /// saved), and starts again under the new identity.
    func rejoin(_ member: Household.Member, power: DevicePower) async {
        let identity: DeviceIdentity
        do {
            let key = try rejoinKeys.withLock { try Household.key(from: &$0) }
            let certificate = try authority.issueDeviceCertificate(for: key.publicKey, deviceName: "d\(member.index)",
                                                                   notBefore: validity.notBefore, notAfter: validity.notAfter)
            identity = try DeviceIdentity(account: authority.account, privateKey: key, certificate: certificate,
                                          signatures: settings.signatures)
        } catch {
            checker.fail("start", "d\(member.index) could not join again: \(error)")
            return
        }
        let old = ReplicaID.devicePrefix(of: member.identity.deviceID.data)
        trace.log("d\(member.index) joins again with a new key")
        let wasUp = member.run.withLock { $0 }.map { run in
            for store in run.stores.values { store.save() }
            return true
        } ?? false
        if wasUp { await power.crash(member) }
        member.become(identity)
        member.removal.withLock { $0 = nil }
        lan.register(identity.deviceID, index: member.index, port: member.port)
        checker.rejoined(device: member.index, prefix: ReplicaID.devicePrefix(of: identity.deviceID.data), old: old)
        // Down already (a crash's restart is due): that restart starts it under the new key.
        if wasUp { await power.restart(member) }
    }
}

/// What removals and account switches (``HouseholdRemovals``, ``AccountSwitches``) do to a device
/// through the household, which runs its devices: its wall clock, its crash and restart, its
/// engine started on its stores.
struct DevicePower: Sendable {
    let wall: @Sendable (Household.Member) -> @Sendable () -> UInt64
    let crash: @Sendable (Household.Member) async -> Void
    let restart: @Sendable (Household.Member) async -> Void
    let startEngine: @Sendable (Household.Member, [String: SimulatedStore]) async throws -> Void
}
