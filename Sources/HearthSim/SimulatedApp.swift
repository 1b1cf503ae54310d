import Foundation
import Hearth
import HearthCore

/// The app of one store on one device: it listens to the store's notifications through the
/// product's fan-out (`ChangeFanOut`, its deliveries on the virtual clock instead of a
/// `DispatchQueue`), as an app's `changes` sequence does, and checks each against what it is
/// owed: Apple's semantics, as the ``Checker``'s model says (docs/simulator.md, "Invariants").
///
/// One per run of a device (a crash ends it with the process); it lives across account
/// switches, as the app does.
final class SimulatedApp: Sendable {
    static let invariant = "each app gets exactly the notifications promised"

    /// A notification the app is owed, in order: the keys whose visible value changed.
    enum Owed: Sendable, CustomStringConvertible {
        /// Entries from peers: `serverChange` (or `initialSyncChange`, the first download).
        case remote(Set<StoreKey>)
        /// An account switch: `accountChange`.
        case accountChange(Set<StoreKey>)

        var description: String {
            switch self {
            case .remote(let keys): "serverChange \(Self.list(keys))"
            case .accountChange(let keys): "accountChange \(Self.list(keys))"
            }
        }

        static func list(_ keys: some Collection<StoreKey>) -> String { "[" + keys.map(\.string).sorted().joined(separator: ",") + "]" }
    }

    private struct State {
        var owed: [Owed] = []
        var received = 0
        var closed = false
        var listener: Task<Void, Never>?
    }

    let device: Int
    let storeIdentifier: String
    /// The product's fan-out, which the store posts to.
    let fanOut: ChangeFanOut
    private let state = Locked(State())
    private let checker: Checker
    private let trace: Trace

    init(device: Int, storeIdentifier: String, executor: SimulationExecutor, checker: Checker, trace: Trace) {
        self.trace = trace
        self.device = device
        self.storeIdentifier = storeIdentifier
        self.checker = checker
        // Each delivery a timer of now: timers of one instant fire in the order set, as a serial queue runs.
        fanOut = ChangeFanOut(storeIdentifier: storeIdentifier, schedule: { job in executor.after(.zero, job) })
        let stream = fanOut.makeStream()
        let listener = Task { [weak self] in
            for await event in stream { self?.received(event) }
        }
        state.withLock { $0.listener = listener }
    }

    /// The store owes the app a notification (told before the store posts).
    func owe(_ owed: Owed) {
        state.withLock { s in if !s.closed { s.owed.append(owed) } }
    }

    private func received(_ event: ChangeEvent) {
        guard let owed = state.withLock({ s -> Owed?? in
            guard !s.closed else { return .none }
            s.received += 1
            return .some(s.owed.isEmpty ? nil : s.owed.removeFirst())
        }) else { return }
        let keys = event.keys.map { StoreKey($0) }
        let told = "\(event.reason) \(Owed.list(keys))"
        // Only these: a line per serverChange would lengthen every trace.
        if event.reason == .accountChange { trace.log("d\(device) \(storeIdentifier) app told accountChange, \(keys.count) keys") }
        guard let owed else {
            checker.fail(Self.invariant, "d\(device) \(storeIdentifier): the app was told \(told), owed nothing")
            return
        }
        let matches = switch owed {
        case .remote(let expected): (event.reason == .serverChange || event.reason == .initialSyncChange) && Set(keys) == expected && keys.count == expected.count
        case .accountChange(let expected): event.reason == .accountChange && Set(keys) == expected && keys.count == expected.count
        }
        if !matches { checker.fail(Self.invariant, "d\(device) \(storeIdentifier): the app was told \(told), owed \(owed)") }
    }

    /// The process ends (a crash, or the run's end): nothing more is delivered or owed.
    func close() {
        state.withLock { s in
            s.closed = true
            s.owed = []
            s.listener?.cancel()
            s.listener = nil
        }
    }

    /// At quiescence: every notification owed was delivered. Then closes.
    func checkDelivered() {
        let owed = state.withLock { $0.closed ? [] : $0.owed }
        if let first = owed.first {
            checker.fail(Self.invariant, "d\(device) \(storeIdentifier): the app was never told \(first) (\(owed.count) owed)")
        }
        close()
    }
}
