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
extension Household {
    /// A removal drawn among the faults (``HouseholdFaults/drawRemoval()``).
    struct Removal: Sendable {
        let victim: Member
        let remover: Member
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

    func remove(_ removal: Removal) async {
        let (victim, remover) = (removal.victim, removal.remover)
        let identity = victim.identity
        let at = wall(of: remover)()
        let record: DeviceRemoval
        do {
            record = try authority.removal(of: identity.deviceID, named: "d\(victim.index)", at: Date(timeIntervalSince1970: Double(at) / 1000))
        } catch {
            checker.fail("start", "d\(remover.index) could not sign the removal of d\(victim.index): \(error)")
            return
        }
        victim.removal.withLock { $0 = RemovedDevice(at: record.removedAt, thief: removal.thief) }
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
                    await crash(victim)
                    executor.after(.seconds(5)) { [self] in Task { await restart(victim) } }
                }
            }
        }
        // `hearth device remove` on the remover: the record saved, its engine told at once.
        remover.removals.withLock { $0 }.merge([record])
        if let after = removal.rejoinAfter {
            executor.after(after) { [self] in
                guard executor.now < end, victim.identity.deviceID == identity.deviceID else { return }
                Task { await rejoin(victim) }
            }
        }
    }

    /// The owner joins the removed device again (`hearth account join`, pairing): a new key, a
    /// certificate for it from the CA, the same files. Its app stops cleanly first (its stores
    /// saved), and starts again under the new identity.
    func rejoin(_ member: Member) async {
        let identity: DeviceIdentity
        do {
            let key = try rejoinKeys.withLock { try Self.key(from: &$0) }
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
        if wasUp { await crash(member) }
        member.become(identity)
        member.removal.withLock { $0 = nil }
        lan.register(identity.deviceID, index: member.index, port: member.port)
        checker.rejoined(device: member.index, prefix: ReplicaID.devicePrefix(of: identity.deviceID.data), old: old)
        // Down already (a crash's restart is due): that restart starts it under the new key.
        if wasUp { await restart(member) }
    }

    /// The members the invariants speak for at the end: honest, and not removed (or joined again).
    var activeMembers: [Member] { members.filter { !$0.hostile && $0.removal.withLock { $0 == nil } } }
}
