import Foundation
import Logging
import HearthCore
import HearthIdentity
import HearthSync
import HearthTesting
import Testing

/// Issue 26 point 6: what a member's floods of forged removals and heartbeats cost, in memory
/// and deterministically (the decisions: verification verdicts, the log, the pace of frames).
@Suite("A peer's floods cost bounded work and log (in memory)")
struct PeerFloodTests {
    typealias State = SessionState<String>

    static func forged(_ authority: AccountAuthority, device: DeviceID, name: String = "legit") -> DeviceRemoval {
        DeviceRemoval(account: authority.account.id, device: device, deviceName: name, removedAt: 1_700_000_000_000,
                      signature: Data(repeating: 0x5A, count: 64))
    }

    @Test("1,024 copies of one forged removal in each of 100 messages: one signature check, one log line; a minute later one line counting the rest")
    func repeatedForgedRemoval() throws {
        let authority = try AccountAuthority.create(displayName: "Flood household")
        let legit = try authority.makeDevice(named: "legit")
        let removals = DeviceRemovals(trust: authority.account.trust, logger: Logger(label: "test"))
        let capture = LogCapture()
        let logger = capture.logger("hearth")
        let log = LimitedLog()
        let record = Self.forged(authority, device: legit.deviceID)
        let start = ContinuousClock.now
        for message in 0..<100 {
            let (added, forged) = removals.mergeFromPeer(Array(repeating: record, count: DeviceRemovals.maximumRecords))
            #expect(added.isEmpty)
            let why = try #require(forged?.why)
            log.log(.warning, "ignoring a forged removal: \(why)", kind: "forged removal", peer: "rogue", to: logger,
                    now: start + .milliseconds(100 * message))
        }
        #expect(removals.signatureChecks == 1)
        #expect(!removals.isRemoved(legit.deviceID))
        #expect(capture.all.count == 1)
        // Another peer's, or another kind, is its own line; the same a minute on says how many were left out.
        #expect(log.log(.warning, "x", kind: "forged removal", peer: "other", to: logger, now: start + .seconds(30)))
        #expect(!log.log(.warning, "x", kind: "forged removal", peer: "rogue", to: logger, now: start + .seconds(59)))
        #expect(log.log(.warning, "y", kind: "forged removal", peer: "rogue", to: logger, now: start + .seconds(61)))
        #expect(capture.all.count == 3)
        #expect(capture.all.last?.message.contains("100 more like it from this peer not logged") == true, "\(capture.all.last?.message ?? "")")
    }

    @Test("Removals from a peer: a held record costs a lookup, a valid one is checked once, and a message stops at its first forged record")
    func removalVerdicts() throws {
        let authority = try AccountAuthority.create(displayName: "Flood household")
        let phone = try authority.makeDevice(named: "phone"), tablet = try authority.makeDevice(named: "tablet")
        let removals = DeviceRemovals(trust: authority.account.trust, logger: Logger(label: "test"))
        let valid = try authority.removal(of: phone.deviceID, named: "phone")
        // A valid record, sent 500 times: checked once, added once.
        let first = removals.mergeFromPeer(Array(repeating: valid, count: 500))
        #expect(first.added == [valid] && first.forged == nil)
        #expect(removals.signatureChecks == 1)
        // Held now: a lookup, whatever the number of messages.
        for _ in 0..<50 { #expect(removals.mergeFromPeer([valid]).added.isEmpty) }
        #expect(removals.signatureChecks == 1)
        // 1,000 distinct forged records in one message: the first is checked, the rest ignored.
        let forgeries = (0..<1000).map { i in
            DeviceRemoval(account: authority.account.id, device: tablet.deviceID, deviceName: "tablet \(i)", removedAt: 1, signature: Data(repeating: 1, count: 64))
        }
        let second = removals.mergeFromPeer([valid] + forgeries)
        #expect(second.added.isEmpty && second.forged?.record == forgeries[0])
        #expect(removals.signatureChecks == 2)
        #expect(!removals.isRemoved(tablet.deviceID))
        // Another account's record never verifies either (and is remembered as such).
        let other = try AccountAuthority.create(displayName: "Elsewhere")
        let foreign = try other.removal(of: tablet.deviceID, named: "tablet")
        #expect(removals.mergeFromPeer([foreign]).forged != nil)
        #expect(removals.mergeFromPeer([foreign]).forged != nil)
        #expect(removals.signatureChecks == 3)
        #expect(!removals.isRemoved(tablet.deviceID))
    }

    /// Drives a reader for `duration` of a peer sending a frame whenever the reader can take
    /// one: what `arrived` says to wait is waited. Returns the frames handled.
    static func flood(for duration: Duration, start: ContinuousClock.Instant, arrived: (ContinuousClock.Instant) -> Duration) -> Int {
        var now = start, handled = 0
        while now - start < duration {
            now += arrived(now)
            guard now - start < duration else { break }
            handled += 1
        }
        return handled
    }

    @Test("Pings beyond 20 at once and then 10 a second wait their turn: a 10 s flood is 119 pings handled, a minute closes the link; honest heartbeats never wait")
    func pacedHeartbeats() {
        let start = ContinuousClock.now
        var state = State(now: start)
        state.greet(SyncMessage.Hello(account: Data(count: 32), stores: [], links: true), removalsDigest: nil)
        _ = state.next()
        let handled = Self.flood(for: .seconds(10), start: start) { state.heartbeatArrived(at: $0) }
        #expect(handled == State.heartbeatBurst + 99, "\(handled) pings handled")
        #expect(!state.heartbeats.exhausted)
        // A minute of it, and the link is to close.
        _ = Self.flood(for: .seconds(51), start: start + .seconds(10)) { state.heartbeatArrived(at: $0) }
        #expect(state.heartbeats.exhausted, "\(state.heartbeats.waitedInARow) waits in a row")
        // Each one handled posts a pong; those not yet sent coalesce into one.
        for _ in 0..<50 { state.mailbox.pong = true }
        #expect(state.next() == .pong && state.next() == nil)
        // An honest peer with the shortest heartbeat an engine uses, pinging a tenth early (as the
        // heartbeat may), its pong to each of our pings too (an older build pings both ways), and
        // a ping to check a link (the test harness's): never waits, for an hour.
        var honest = State(now: start)
        var now = start
        for beat in 0..<16_000 {
            now = start + (SyncEngine.minimumHeartbeatInterval * 0.9) * beat
            #expect(honest.heartbeatArrived(at: now) == .zero)
            #expect(honest.heartbeatArrived(at: now + .milliseconds(5)) == .zero)
            if beat % 100 == 0 { #expect(honest.heartbeatArrived(at: now + .milliseconds(6)) == .zero) }
        }
        #expect(honest.heartbeats.delayed == 0)
    }

    @Test("Removals messages beyond 16 at once and then one a second wait their turn, a minute closes the link; a household's relays never do")
    func pacedRemovals() {
        let start = ContinuousClock.now
        var state = State(now: start)
        let handled = Self.flood(for: .seconds(10), start: start) { state.removalsArrived(at: $0) }
        #expect(handled == State.removalsBurst + 9, "\(handled) removals messages handled")
        #expect(!state.removalMessages.exhausted)
        _ = Self.flood(for: .seconds(52), start: start + .seconds(10)) { state.removalsArrived(at: $0) }
        #expect(state.removalMessages.exhausted, "\(state.removalMessages.waitedInARow) waits in a row")
        // After the hellos, then twelve removals made one after another (each relayed by 8 peers).
        var honest = State(now: start)
        #expect(honest.removalsArrived(at: start) == .zero)
        for removal in 1...12 {
            for relay in 0..<8 { #expect(honest.removalsArrived(at: start + .seconds(10 * removal) + .milliseconds(relay)) == .zero) }
        }
    }

    @Test("The log limiter: one line per key per interval, the count of lines left out on the next, bounded keys")
    func logLimiter() {
        let start = ContinuousClock.now
        var limiter = LogLimiter(interval: .seconds(60), maximumKeys: 4)
        #expect(limiter.admit("a", now: start) == 0)
        for i in 1...999 { #expect(limiter.admit("a", now: start + .milliseconds(i)) == nil) }
        #expect(limiter.admit("b", now: start + .seconds(1)) == 0)
        #expect(limiter.admit("a", now: start + .seconds(60)) == 999)
        #expect(limiter.admit("a", now: start + .seconds(61)) == nil)
        // Full of recent keys: it starts again rather than grow.
        for key in ["c", "d", "e", "f", "g"] { #expect(limiter.admit(key, now: start + .seconds(62)) == 0) }
    }
}
