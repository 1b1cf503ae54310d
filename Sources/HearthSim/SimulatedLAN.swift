import Foundation
import HearthCore
import HearthIdentity
import HearthSync
import HearthTesting
import HearthTransport
import NIOCore

/// The household's network: HearthTesting's `InMemoryNetwork` (FIFO links, frames split as on
/// TCP, certificates checked as the handshake does), with the faults of a home LAN on top:
/// a delay on every write (1 to 20 ms, the link staying FIFO), partitions (a dial across one is
/// refused, the links across it are cut), connection resets, and a device cut off while it is
/// down, and the link faults of ``LinkFaults`` (stalls, slow links, flaps, half-open links).
/// Every link end is known here, so a fault finds it.
final class SimulatedLAN: Sendable {
    private struct LinkEnd {
        let local: Int
        let remote: Int
        let control: LinkEndControl
        /// Closes the in-memory link (both ends see it end, but a half-open end).
        let closeLink: @Sendable () -> Void

        func close() {
            control.close(cut: true)
            closeLink()
        }
    }

    private struct State {
        /// Each device's side of the current partition (all 0: no partition).
        var side: [Int]
        /// Counts partitions: a heal names the one it ends.
        var partitions: UInt64 = 0
        /// Devices that are down (crashed): nothing reaches them.
        var down: Set<Int> = []
        /// Pairs of devices cut off from each other (by cut number), both reaching the others.
        var cuts: [UInt64: (Int, Int)] = [:]
        var nextCut: UInt64 = 0
        var ends: [UInt64: LinkEnd] = [:]
        var nextEnd: UInt64 = 0
        /// Port → the device listening on it.
        var owners: [Int: Int] = [:]
        var devices: [DeviceID: Int] = [:]
    }

    let memory: InMemoryNetwork
    let faults = LinkFaults()
    private let state: Locked<State>
    private let trace: Trace
    fileprivate let executor: SimulationExecutor
    /// Draws each write's delay.
    private let delays: Locked<SplitMix64>
    /// A write reaches the peer this long after it is made, at most (drawn from 1 ms up).
    static let maximumDelay = 20

    init(devices: Int, date: @escaping @Sendable () -> Date, trace: Trace, executor: SimulationExecutor, seed: UInt64) {
        memory = InMemoryNetwork(date: date)
        state = Locked(State(side: Array(repeating: 0, count: devices)))
        self.trace = trace
        self.executor = executor
        delays = Locked(SplitMix64(seed: seed))
    }

    /// The LAN's delay for one write: the writer waits it out before its frames arrive, so the
    /// link stays FIFO, as TCP is, and what is posted meanwhile goes out with the next write.
    fileprivate func delay() async throws {
        let milliseconds = 1 + delays.withLock { $0.next() } % UInt64(Self.maximumDelay)
        try await executor.sleep(for: .milliseconds(Int64(milliseconds)))
    }

    /// Names `device` by `index` in the trace, and says which port it listens on.
    func register(_ device: DeviceID, index: Int, port: Int) {
        state.withLock { s in
            s.devices[device] = index
            s.owners[port] = index
        }
    }

    /// Device `index`'s network, for its engine's environment.
    func maker(for index: Int) -> @Sendable (PeerNetworkSetup) throws -> any PeerNetwork {
        { [self] setup in Endpoint(lan: self, index: index, inner: try memory.maker(setup)) }
    }

    // MARK: Faults

    /// Splits the devices: `side[i]` is device i's side (replacing any partition). Links across
    /// are cut. Returns the partition's number, for ``heal(_:)``.
    func partition(_ side: [Int]) -> UInt64 {
        let (cut, number) = state.withLock { s -> ([LinkEnd], UInt64) in
            s.side = side
            s.partitions += 1
            return (s.ends.values.filter { side[$0.local] != side[$0.remote] }, s.partitions)
        }
        for end in cut { end.close() }
        return number
    }

    /// Ends partition `number` if it is still the current one (any partition if nil). Returns
    /// whether it did.
    @discardableResult
    func heal(_ number: UInt64? = nil) -> Bool {
        state.withLock { s in
            guard number == nil || number == s.partitions, s.side.contains(where: { $0 != 0 }) else { return false }
            s.side = Array(repeating: 0, count: s.side.count)
            return true
        }
    }

    /// Cuts devices `a` and `b` off from each other (their link ends, and no dial between them
    /// succeeds) until ``rejoin(_:)``; each still reaches every other device. Returns the cut's number.
    func cut(_ a: Int, _ b: Int) -> UInt64 {
        let (ends, number) = state.withLock { s -> ([LinkEnd], UInt64) in
            s.nextCut += 1
            s.cuts[s.nextCut] = (a, b)
            return (s.ends.values.filter { Set([$0.local, $0.remote]) == Set([a, b]) }, s.nextCut)
        }
        for end in ends { end.close() }
        return number
    }

    /// Ends cut `number`. Returns whether it was still in place.
    @discardableResult
    func rejoin(_ number: UInt64) -> Bool { state.withLock { $0.cuts.removeValue(forKey: number) != nil } }

    /// Ends every cut. Returns whether there was one.
    func rejoinAll() -> Bool {
        state.withLock { s in
            defer { s.cuts = [:] }
            return !s.cuts.isEmpty
        }
    }

    private static func isCut(_ s: State, _ a: Int, _ b: Int) -> Bool {
        s.cuts.values.contains { ($0.0 == a && $0.1 == b) || ($0.0 == b && $0.1 == a) }
    }

    /// The link ends up now, as (local, remote) pairs, sorted (for a seeded choice).
    var links: [(local: Int, remote: Int, id: UInt64)] {
        state.withLock { s in s.ends.map { (local: $0.value.local, remote: $0.value.remote, id: $0.key) } }
            .sorted { $0.id < $1.id }
    }

    /// Resets the connection of link end `id` (both ends see it end).
    func reset(_ id: UInt64) {
        state.withLock { $0.ends[id] }?.close()
    }

    /// Makes the connection of link end `id` half-open: the peer's end closes (its session
    /// ends), this one does not see it (``LinkEndControl``). Returns whether the end was up.
    func halfOpen(_ id: UInt64) -> Bool {
        guard let end = state.withLock({ $0.ends[id] }) else { return false }
        end.control.makeHalfOpen()
        end.closeLink()
        return true
    }

    /// Whether link end `id` is still up (its session has not ended).
    func isUp(_ id: UInt64) -> Bool { state.withLock { $0.ends[id] != nil } }

    /// Closes every link between `a` and `b` (a flap; ``LinkFaults/block(_:_:)`` refuses their dials meanwhile).
    func closeLinks(_ a: Int, _ b: Int) {
        let pair = LinkFaults.Pair(a, b)
        for end in state.withLock({ s in s.ends.values.filter { LinkFaults.Pair($0.local, $0.remote) == pair } }) { end.close() }
    }

    /// Device `index` is down (crashed): its links are cut, and none is made to or from it.
    func setDown(_ index: Int, _ down: Bool) {
        let cut = state.withLock { s -> [LinkEnd] in
            if down { s.down.insert(index) } else { s.down.remove(index) }
            return down ? s.ends.values.filter { $0.local == index || $0.remote == index } : []
        }
        for end in cut { end.close() }
    }

    fileprivate func reachable(from local: Int, port: Int) -> Int? {
        state.withLock { s in
            guard let remote = s.owners[port], !s.down.contains(local), !s.down.contains(remote),
                  s.side[local] == s.side[remote], !faults.isBlocked(local, remote), !Self.isCut(s, local, remote) else { return nil }
            return remote
        }
    }

    fileprivate func index(of device: DeviceID) -> Int {
        state.withLock { $0.devices[device] } ?? -1
    }

    fileprivate func opened(local: Int, remote: Int, control: LinkEndControl, close: @escaping @Sendable () -> Void) -> UInt64? {
        let id = state.withLock { s -> UInt64? in
            // Cut meanwhile (a partition, a pair cut, a flap or a crash between the dial and the session's start).
            guard !s.down.contains(local), !s.down.contains(remote), s.side[local] == s.side[remote],
                  !faults.isBlocked(local, remote), !Self.isCut(s, local, remote) else { return nil }
            s.nextEnd += 1
            s.ends[s.nextEnd] = LinkEnd(local: local, remote: remote, control: control, closeLink: close)
            return s.nextEnd
        }
        if id != nil { trace.log("link d\(local)->d\(remote) up") }
        return id
    }

    fileprivate func closed(_ id: UInt64) {
        guard let end = state.withLock({ $0.ends.removeValue(forKey: id) }) else { return }
        end.control.close()
        let halfOpen = !end.control.isHalfOpen ? "" : end.control.wasCut ? " (half-open, cut)" : " (half-open, given up by d\(end.local))"
        trace.log("link d\(end.local)->d\(end.remote) down" + halfOpen)
    }

    fileprivate func vanished(_ frames: Int, from local: Int, to remote: Int) {
        trace.log("d\(local)->d\(remote) \(frames) frame\(frames == 1 ? "" : "s") vanished (half-open)")
    }

    fileprivate func sent(_ frames: Int, from local: Int, to remote: Int) {
        trace.log("d\(local)->d\(remote) \(frames) frame\(frames == 1 ? "" : "s")")
    }

    // MARK: One device's view

    private final class Endpoint: PeerNetwork {
        let lan: SimulatedLAN
        let index: Int
        let inner: any PeerNetwork

        init(lan: SimulatedLAN, index: Int, inner: any PeerNetwork) {
            self.lan = lan
            self.index = index
            self.inner = inner
        }

        func listenForLinks(host: String, port: Int) async throws -> any PeerLinkListener {
            Listener(lan: lan, index: index, inner: try await inner.listenForLinks(host: host, port: port))
        }

        func dial(host: String, port: Int, expecting: DeviceID?) async throws -> any PeerLink {
            guard lan.reachable(from: index, port: port) != nil else {
                throw SimulationError("d\(index) cannot reach port \(port) (partitioned or down)")
            }
            return lan.wrap(try await inner.dial(host: host, port: port, expecting: expecting), local: index)
        }

        func replaceIdentity(_ identity: DeviceIdentity) throws { try inner.replaceIdentity(identity) }
    }

    private final class Listener: PeerLinkListener {
        let lan: SimulatedLAN
        let index: Int
        let inner: any PeerLinkListener
        var port: Int? { inner.port }

        init(lan: SimulatedLAN, index: Int, inner: any PeerLinkListener) {
            self.lan = lan
            self.index = index
            self.inner = inner
        }

        func forEachLink(_ handle: (any PeerLink) async -> Void) async {
            await inner.forEachLink { link in await handle(lan.wrap(link, local: index)) }
        }

        func close() async { await inner.close() }
    }

    fileprivate func wrap(_ link: some PeerLink, local: Int) -> any PeerLink {
        SimulatedLink(inner: link, lan: self, local: local, remote: index(of: link.peer.deviceID), control: LinkEndControl())
    }
}

/// One end of a link on the simulated LAN: the in-memory link, known to the LAN while a
/// session runs on it (so a fault can cut it), its frames traced.
struct SimulatedLink<Inner: PeerLink>: PeerLink {
    let inner: Inner
    let lan: SimulatedLAN
    let local: Int
    let remote: Int
    let control: LinkEndControl

    struct Writer: PeerLinkWriter {
        let inner: Inner.Outbound
        let lan: SimulatedLAN
        let local: Int
        let remote: Int
        let control: LinkEndControl

        func writeFrames(_ frames: [ByteBuffer]) async throws {
            try await lan.delay()
            try await lan.faults.pass(from: local, to: remote, bytes: frames.reduce(0) { $0 + 4 + $1.readableBytes }, executor: lan.executor)
            guard !control.isHalfOpen else {
                lan.vanished(frames.count, from: local, to: remote)
                return
            }
            lan.sent(frames.count, from: local, to: remote)
            try await inner.writeFrames(frames)
        }
    }

    var peer: TLSPeer { inner.peer }
    var eventLoop: (any EventLoop)? { nil }

    func executeThenClose<Result>(_ body: (FaultyInbound<Inner.Inbound>, Writer) async throws -> Result) async throws -> Result {
        let inner = inner
        guard let id = lan.opened(local: local, remote: remote, control: control, close: { inner.closeSoon() }) else {
            await inner.close()
            throw SimulationError("the link d\(local)->d\(remote) was cut before its session began")
        }
        defer { lan.closed(id) }
        return try await inner.executeThenClose { inbound, outbound in
            try await body(FaultyInbound(base: inbound, control: control),
                           Writer(inner: outbound, lan: lan, local: local, remote: remote, control: control))
        }
    }

    func close() async {
        control.close()
        await inner.close()
    }

    func closeSoon() {
        control.close()
        inner.closeSoon()
    }
}

/// A failure of the simulation itself (an argument, a fault refused), with its reason.
struct SimulationError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
