import Foundation
import Hearth
import HearthCore
import HearthIdentity
import HearthSync
import HearthTesting
import Logging

/// One run: a household of devices of one account, each with its own simulated disk and the
/// production sync engine, on the simulated LAN and the virtual clock; a workload of writes
/// and removals and the faults drawn from one seed; the invariants checked as it goes and once
/// it is quiet (docs/simulator.md).
final class Household: Sendable {
    struct Settings: Sendable {
        var devices = 8
        /// How the devices sign and verify entries: Ed25519, or the fast stand-in (main.swift
        /// chooses per seed; docs/simulator.md, "Signatures").
        var signatures = EntrySignatures.Scheme.ed25519
        var hours = 1.0
        /// Writes per device per simulated minute.
        var writesPerMinute = 1.0
        /// Faults per simulated hour, for the household: 3 each of partitions, resets, crashes
        /// and clock faults (the same with `--clock-faults`, whose seeds stay as they were).
        var faultsPerHour = 12.0
        var stores = ["com.example.notes", "com.example.settings"]
        var keys = 24
        var logLevel = Logger.Level.critical
        var echo = false
        var plant: SimulatedStore.Plant?
        /// Clock jumps among the faults (`--clock-faults`): off by default while the violations
        /// they bring are open (docs/simulator.md, "Findings").
        var clockFaults = false
        /// Stalls, slow links, flaps and half-open links among the faults (on unless
        /// `--no-link-faults`), each kind as often as each of the others.
        var linkFaults = true
        /// The last device is the hostile member (`--hostile`, ``HostileStore``): off by default
        /// while what it finds is open (docs/simulator.md, "Findings").
        var hostile = false
        /// Ends the workload at the first violation (`--fail-fast`, for scripts/mutants.sh): the
        /// household then heals and goes quiet as at the end, and the final checks run.
        var failFast = false
        /// One crash in two follows a write within its write-behind second, and the device's
        /// app writes again as it restarts (on unless `--no-crash-after-write`; not with
        /// `--clock-faults`, whose seeds stay as they were): peers may have the write and the
        /// disk not yet (docs/simulator.md, finding 1).
        var crashAfterWrite = true
        /// One partition fault in two cuts a single pair of devices off from each other instead
        /// (`--no-pair-cuts` leaves them out).
        var pairCuts = true
        /// Device removals among the faults (`--removals`): one device removes another, which may
        /// join again with a new key (``HouseholdRemovals``). Off by default while what they
        /// find is open (docs/simulator.md, finding 10); without them a run draws as before.
        var removals = false
        /// With removals, one in two leaves a thief's copy of the removed device going on, with
        /// devices away from the remover meanwhile (`--thief`).
        var thief = false
        /// Account switches among the faults, and each app's notifications checked (on unless
        /// `--no-account-switches`; not with `--clock-faults` nor `--hostile`, whose seeds stay as
        /// they were): ``AccountSwitches``.
        var accountSwitches = true
    }

    struct Outcome: Sendable {
        let seed: UInt64
        let digest: [UInt8]
        let events: Int
        let jobs: Int
        let violations: [Checker.Violation]
        let lastEvents: [String]
        let foreignEnqueues: Int
        let strayTimers: Int
    }

    /// The virtual wall clock's start: 2026-01-01, whatever the day of the run.
    static let t0: UInt64 = 1_767_225_600_000
    /// The quiet spell before the final check: far longer than the longest back-off (10 s
    /// and its jitter) and a heartbeat; with link faults, than the longest a half-open link
    /// may live too (``HouseholdFaults/halfOpenBound``, 8.5 min), and the sync after it.
    var quietSpell: Duration { settings.linkFaults ? .seconds(720) : .seconds(300) }

    /// A device as the household knows it.
    final class Member: Sendable {
        let index: Int
        /// Its identity now: a device removed and joining again has a new key (``HouseholdRemovals/rejoin(_:power:)``).
        private let current: Locked<DeviceIdentity>
        var identity: DeviceIdentity { current.withLock { $0 } }
        /// The account's removals as this device knows them (`accounts/<id>/removals`: kept
        /// across crashes, as `hearth device remove` saves its record at once; a thief's copy
        /// starts each run from its files copied before the removal, so with none).
        let removals: Locked<DeviceRemovals>
        /// The removal of its current identity, once made (``HouseholdRemovals/remove(_:power:)``).
        let removal = Locked<RemovedDevice?>(nil)
        let disk: SimulatedDisk
        let port: Int
        /// Its run now (nil while it is down).
        let run = Locked<Run?>(nil)
        /// The source of its runs' replica IDs.
        let ids: Locked<SplitMix64>
        /// Crashed and not restarted yet.
        let down = Locked(false)
        /// How far its clock is off, in milliseconds (a clock fault).
        let skew = Locked<Int64>(0)
        /// The hostile member: its stores are ``HostileStore``s, and no invariant speaks for it.
        let hostile: Bool

        init(index: Int, identity: DeviceIdentity, disk: SimulatedDisk, port: Int, seed: UInt64, hostile: Bool, logger: Logger) {
            self.hostile = hostile
            self.index = index
            current = Locked(identity)
            removals = Locked(DeviceRemovals(trust: identity.account.trust, logger: logger))
            self.disk = disk
            self.port = port
            ids = Locked(SplitMix64(seed: seed))
        }

        /// Takes `identity` on (a device joining again with a new key).
        func become(_ identity: DeviceIdentity) { current.withLock { $0 = identity } }
    }

    /// A device's identity removed from the account: when (on the remover's clock), and whether
    /// what goes on running is a thief's copy of its files, which never keeps the record.
    struct RemovedDevice: Sendable {
        let at: UInt64
        let thief: Bool
    }

    struct Run: Sendable {
        let engine: SyncEngine
        let stores: [String: SimulatedStore]
        /// The hostile member's stores (its `stores` are none).
        var hostile: [String: HostileStore] = [:]
    }

    let seed: UInt64
    let settings: Settings
    let executor: SimulationExecutor
    let trace: Trace
    let checker: Checker
    let lan: SimulatedLAN
    let members: [Member]
    let logger: Logger
    /// The workload's, the faults' and the hostile member's draws (the engines draw from their own).
    let draws: Draws
    /// The faults drawn among the workload.
    let faults: HouseholdFaults
    /// Device removals and devices joining again (``HouseholdRemovals``).
    let removals: HouseholdRemovals
    /// The other account and the devices on it now (``AccountSwitches``).
    let accounts: AccountSwitches

    init(seed: UInt64, settings: Settings, executor: SimulationExecutor) throws {
        self.seed = seed
        self.settings = settings
        self.executor = executor
        let trace = Trace(clock: { executor.now }, echo: settings.echo)
        self.trace = trace
        var logger = Logger(label: "hearth-sim")
        logger.logLevel = settings.logLevel
        self.logger = logger
        var keys = SplitMix64(seed: seed)
        func key() throws -> Ed25519PrivateKey { try Self.key(from: &keys) }
        // Keys from the seed, so device IDs (which order sessions and origins) are the seed's;
        // certificates dated around the virtual clock (their serials stay random: the trace
        // never shows certificate bytes).
        let start = Date(timeIntervalSince1970: Double(Self.t0) / 1000)
        let (notBefore, notAfter) = (start.addingTimeInterval(-86_400), start.addingTimeInterval(5 * 365 * 86_400))
        let caKey = try key()
        let ca = try CertificateIssuer.issue(kind: .authority, commonName: "Simulated household", publicKey: caKey.publicKey,
                                             issuer: nil, signingKey: caKey, notBefore: notBefore, notAfter: notAfter)
        let authority = try AccountAuthority(account: Account(caCertificate: ca), privateKey: caKey)
        let lan = SimulatedLAN(devices: settings.devices, date: { start.addingTimeInterval(executor.now / .seconds(1)) }, trace: trace,
                               executor: executor, seed: keys.next())
        self.lan = lan
        var members: [Member] = []
        for index in 0..<settings.devices {
            let deviceKey = try key()
            let certificate = try authority.issueDeviceCertificate(for: deviceKey.publicKey, deviceName: "d\(index)",
                                                                   notBefore: notBefore, notAfter: notAfter)
            let identity = try DeviceIdentity(account: authority.account, privateKey: deviceKey, certificate: certificate,
                                              signatures: settings.signatures)
            let port = lan.memory.reservePort()
            lan.register(identity.deviceID, index: index, port: port)
            members.append(Member(index: index, identity: identity, disk: SimulatedDisk(seed: seed &+ UInt64(index)), port: port,
                                  seed: keys.next(), hostile: settings.hostile && index == settings.devices - 1, logger: logger))
        }
        self.members = members
        checker = Checker(trace: trace, prefixes: Dictionary(uniqueKeysWithValues: members.map {
            (ReplicaID.devicePrefix(of: $0.identity.deviceID.data), $0.index)
        }), honest: members.filter { !$0.hostile }.map(\.index), checksCoverage: !settings.hostile && !settings.clockFaults)
        draws = Draws(seed: keys.next())
        removals = HouseholdRemovals(seed: seed, authority: authority, validity: (notBefore, notAfter), settings: settings,
                                     lan: lan, trace: trace, executor: executor, checker: checker)
        accounts = AccountSwitches(seed: seed, start: start, settings: settings, members: members, lan: lan, trace: trace,
                                   executor: executor, checker: checker, draws: draws, logger: logger)
        faults = HouseholdFaults(settings: settings, members: members, lan: lan, trace: trace, executor: executor, checker: checker, draws: draws)
    }

    /// An Ed25519 key made of the next 32 bytes of `keys` (a seed's keys are the seed's).
    static func key(from keys: inout SplitMix64) throws -> Ed25519PrivateKey {
        try Ed25519PrivateKey(rawRepresentation: (0..<4).flatMap { _ in withUnsafeBytes(of: keys.next()) { Array($0) } })
    }

    // MARK: The run

    func run() async -> Outcome {
        for member in members { await start(member) }
        let end = Duration.seconds(settings.hours * 3600)
        let writeRate = Double(settings.devices) * settings.writesPerMinute / 60   // per second
        // Each kind of fault as often as each of the first four (3 an hour).
        let faultRate = settings.faultsPerHour * Double(faults.faultKinds) / Double(HouseholdFaults.firstKinds) / 3600
        let hostileRate = settings.hostile ? Self.hostileActsPerHour / 3600 : 0
        let total = writeRate + faultRate + hostileRate
        var crashed = false
        while executor.now < end {
            // The next event of a Poisson process of writes, faults and the hostile member's acts.
            let gap = -log(1 - draws.unit()) / total
            try? await executor.sleep(for: .milliseconds(Int64(gap * 1000)))
            guard executor.now < end, !settings.failFast || checker.violations.isEmpty else { break }
            let pick = draws.unit()
            if pick < writeRate / total { write() } else if pick < (writeRate + faultRate) / total { crashed = await fault() || crashed } else { hostileAct() }
        }
        trace.log("workload over: clocks set right, healing, restarting, then \(quietSpell) of quiet")
        for member in members { member.skew.withLock { $0 = 0 } }
        await accounts.switchBackAll(power: power)
        if lan.heal() { trace.log("heal") }
        if lan.rejoinAll() { trace.log("every pair rejoined") }
        lan.faults.healAll()
        for member in members { await restart(member) }
        try? await executor.sleep(for: quietSpell)
        var replicas: [String: [(device: Int, replica: Replica)]] = [:]
        // A removed device (not joined again) is no longer of the household.
        for member in activeMembers {
            guard let run = member.run.withLock({ $0 }) else { continue }
            for (name, store) in run.stores { replicas[name, default: []].append((member.index, store.replica)) }
        }
        checker.checkQuiescent(replicas)
        checker.checkRemovals(replicas)
        checker.checkTombstones(replicas, everyDeviceHonest: !settings.hostile)
        accounts.checkAccounts(replicas)
        for member in members { await member.run.withLock({ $0 })?.engine.stop() }
        trace.log("end")
        return Outcome(seed: seed, digest: trace.digest, events: trace.count, jobs: executor.jobsRun, violations: checker.violations,
                       lastEvents: trace.lastEvents, foreignEnqueues: executor.foreignEnqueues, strayTimers: executor.strayTimers)
    }

    /// The members the invariants speak for at the end: honest, and not removed (or joined again).
    var activeMembers: [Member] { members.filter { !$0.hostile && $0.removal.withLock { $0 == nil } } }

    /// What removals and account switches do to a device through the household (``DevicePower``).
    private var power: DevicePower {
        DevicePower(wall: { [self] in wall(of: $0) }, crash: { [self] in await crash($0) }, restart: { [self] in await restart($0) },
                    startEngine: { [self] in try await startEngine($0, stores: $1) })
    }

    // MARK: Devices

    /// The device's wall clock: the virtual one, off by its skew.
    func wall(of member: Member) -> @Sendable () -> UInt64 {
        { [executor] in
            let now = executor.now.components
            return UInt64(clamping: Int64(Self.t0) + now.seconds * 1000 + now.attoseconds / 1_000_000_000_000_000 + member.skew.withLock { $0 })
        }
    }

    private func environment(for member: Member) -> SyncEnvironment {
        let executor = executor
        let base = ContinuousClock.now
        let clock = SyncClock(wallMilliseconds: wall(of: member),
                              now: { base.advanced(by: executor.now) },
                              sleep: { try await executor.sleep(for: $0) })
        var jitter = SplitMix64(seed: seed ^ (0xD1A1 &* UInt64(member.index + 1)))
        return SyncEnvironment(clock: clock, random: .seeded(SplitMix64(seed: jitter.next())), network: lan.maker(for: member.index))
    }

    /// Opens the device's stores from its disk and starts its engine, dialling the devices after it.
    private func start(_ member: Member) async {
        let wall = wall(of: member)
        var stores: [String: SimulatedStore] = [:]
        if member.hostile {
            await startHostile(member, environment: environment(for: member))
            return
        }
        do {
            // Planted: the same draws each run, so the same replica IDs.
            let ids = settings.plant == .sameReplicaID ? Locked(SplitMix64(seed: UInt64(member.index))) : member.ids
            for name in settings.stores {
                let location = StoreLocation(dataDirectory: "/sim/d\(member.index)", storeIdentifier: name,
                                             account: member.identity.account.id.hex)
                let (storage, replica) = try ReplicaStorage.open(location, on: member.disk, device: member.identity.deviceID.data, logger: logger,
                                                                 wall: wall, random: { ids.withLock { $0.next() } })
                checker.loaded(replica, device: member.index, store: name)
                stores[name] = SimulatedStore(device: member.index, storeIdentifier: name, replica: replica, storage: storage, wall: wall,
                                              checker: checker, executor: executor, trace: trace, plant: settings.plant,
                                              app: accounts.makeApp(member, store: name))
            }
            try await startEngine(member, stores: stores)
        } catch {
            checker.fail("start", "d\(member.index) could not start: \(error)")
        }
    }

    /// Starts the device's engine on its stores, dialling the devices after it.
    func startEngine(_ member: Member, stores: [String: SimulatedStore]) async throws {
        // A thief's copy starts from files copied before its removal: it knows of none.
        if member.removal.withLock({ $0?.thief == true }) {
            member.removals.withLock { $0 = DeviceRemovals(trust: member.identity.account.trust, logger: logger) }
        }
        let engine = try SyncEngine(identity: member.identity, options: .init(host: "memory", port: member.port),
                                    removals: member.removals.withLock { $0 }, environment: environment(for: member), logger: logger)
        for name in settings.stores { _ = try engine.attach(stores[name]!) }
        try await engine.start()
        member.run.withLock { $0 = Run(engine: engine, stores: stores) }
        for other in members where other.index > member.index { engine.addPeer(host: "memory", port: other.port) }
        trace.log("d\(member.index) up")
    }

    /// Cuts the device's power: links gone, memory gone, the disk back to what was durable.
    func crash(_ member: Member) async {
        guard let run = member.run.withLock({ s in defer { s = nil }; return s }) else { return }
        member.down.withLock { $0 = true }
        trace.log("d\(member.index) crashes")
        lan.setDown(member.index, true)
        for store in run.stores.values { store.crash() }
        member.disk.crash()
        checker.crashed(device: member.index, stores: settings.stores)
        await run.engine.stop()
    }

    func restart(_ member: Member) async {
        // Once: the end of the workload restarts every device still down, and its timer may come after.
        guard member.down.withLock({ d in defer { d = false }; return d }) else { return }
        member.disk.restart()
        lan.setDown(member.index, false)
        trace.log("d\(member.index) restarts")
        await start(member)
    }

    // MARK: Workload and faults

    /// A set (4 in 5) or a removal of a random key of a random store, on a random device that is
    /// up; one in 8 is a conflict: two devices write the key in the same millisecond, so their
    /// stamps are often equal and the origin decides.
    /// `launched`: the app of that device, just restarted, writes as it starts (before its
    /// peers told it what they have).
    private func write(launched: Member? = nil) {
        let up = members.filter { !$0.hostile && $0.run.withLock { $0 != nil } }
        guard !up.isEmpty else { return }
        var chosen = up
        let writers: Int
        if let launched {
            guard up.contains(where: { $0 === launched }) else { return }
            (chosen, writers) = ([launched], 1)
        } else {
            writers = up.count > 1 && draws.draw(below: 8) == 0 ? 2 : 1
            for i in 0..<writers { chosen.swapAt(i, i + draws.draw(below: chosen.count - i)) }
        }
        let store = settings.stores[draws.draw(below: settings.stores.count)]
        let key = StoreKey("k\(draws.draw(below: settings.keys))")
        for member in chosen.prefix(writers) {
            let value: PropertyListValue? = draws.draw(below: 5) == 0 ? nil : .integer(Int64(draws.draw(below: 1_000_000)))
            guard let entry = member.run.withLock({ $0 })?.stores[store]?.write(value, forKey: key) else { continue }
            let others = up.filter { $0 !== member }.compactMap { other in
                other.run.withLock { $0 }?.stores[store].map { (device: other.index, vector: $0.syncVector) }
            }
            checker.logged(entry, device: member.index, store: store, others: others)
        }
        crashSoon(chosen[0])
    }

    /// The crash drawn to follow a write (``HouseholdFaults/crashAfterWrite``), of the device that wrote.
    private func crashSoon(_ member: Member) {
        guard let delay = faults.crashAfterWrite.withLock({ d in defer { d = nil }; return d }) else { return }
        let (down, end) = (draws.duration(5...300), Duration.seconds(settings.hours * 3600))
        trace.log("d\(member.index) crashes in \(delay)")
        executor.after(delay) { [self] in
            // Not once the workload is over (every device is then up for the final checks).
            guard executor.now < end else { return }
            Task {
                await crash(member)
                executor.after(down) { [self] in
                    Task {
                        await restart(member)
                        // Its app writes as it starts: a restart that gave out again the
                        // sequence numbers the crash lost would show now (mutant 11).
                        if executor.now < end { write(launched: member) }
                    }
                }
            }
        }
    }

    /// One fault drawn from the seed (``HouseholdFaults/fault()``); a crash is the household's to
    /// make. Returns whether a device crashed.
    private func fault() async -> Bool {
        switch faults.fault() {
        case .crash(let member, let down)?:
            await crash(member)
            executor.after(down) { [self] in Task { await restart(member) } }
            return true
        case .removal(let removal)?:
            await removals.remove(removal, power: power)
            return false
        case .accountSwitch(let member, let away)?:
            await accounts.switchAccount(member, away: away, power: power)
            return false
        case nil:
            return false
        }
    }
}
