import ArgumentParser
import Foundation
import Hearth
import HearthDaemon
import HearthIdentity

/// `hearth peers`: which devices this store is connected to.
struct PeersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peers",
        abstract: "Show the peer devices a store is connected to, and when entries last moved.",
        discussion: """
        If hearth serve or hearth watch holds the store, their live state is shown. Otherwise the store \
        is opened here for --wait seconds, and the devices that connected in that time are listed.
        """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp("Seconds to wait for peers when no other process holds the store.", valueName: "seconds"))
    var wait: Double = 3
    @Flag(help: "Print JSON for scripts.") var json = false

    func run() async throws {
        let access = try StoreAccess(global: global, options: store)
        guard let identity = access.identity else {
            throw CommandError(.notSignedIn, "not signed in: stores sync only in an account (hearth account create / join)")
        }
        let (report, source, heldBy) = try await observe(access, identity: identity)
        if json {
            let peers = report.connectedPeers.map { "\"\($0)\"" }.joined(separator: ",")
            emit("{\"store\":\(PropertyListJSON.quote(access.storeIdentifier)),\"device\":\"\(identity.deviceID.hex)\","
                 + "\"port\":\(report.port.map(String.init) ?? "null"),\"connectedPeers\":[\(peers)],"
                 + "\"lastExchange\":\(report.lastExchange.map { "\"\(PropertyListJSON.dateString($0))\"" } ?? "null"),"
                 + "\"entriesSent\":\(report.entriesSent),\"entriesReceived\":\(report.entriesReceived),"
                 + "\"discovery\":\(PropertyListJSON.quote(report.discovery)),"
                 + "\"discoveredPeers\":[\(report.discoveredPeers.map(PropertyListJSON.quote).joined(separator: ","))],"
                 + "\"heldBy\":\(heldBy.map(String.init) ?? "null")}")
            return
        }
        emit("store \(access.storeIdentifier) on \(access.whoAmI)")
        emit("  listening on port \(report.port.map(String.init) ?? "-"), discovery \(report.discovery)")
        emit("  \(report.connectedPeers.count) connected peer device\(report.connectedPeers.count == 1 ? "" : "s") (\(source)):")
        for peer in report.connectedPeers { emit("    \(peer.prefix(8))  \(peer)") }
        let discovered = report.discoveredPeers
        emit("  \(discovered.count) discovered peer\(discovered.count == 1 ? "" : "s") (connected or not):")
        for peer in discovered { emit("    \(peer)") }
        let last = report.lastExchange.map { "\(PropertyListJSON.dateString($0)) (\(Int(-$0.timeIntervalSinceNow)) s ago)" } ?? "never"
        emit("  last entries exchanged: \(last); sent \(report.entriesSent), received \(report.entriesReceived)")
    }

    /// The live state from the process that holds the store, or what this process sees in
    /// --wait seconds with the store open here. A `hearth` process that holds the store but
    /// does not answer yet (a `serve` starting, a one-shot `set`) is waited for, a little.
    private func observe(_ access: StoreAccess, identity: DeviceIdentity) async throws -> (LiveStatus, String, Int32?) {
        let deadline = ContinuousClock.now + .milliseconds(Int(max(0, wait) * 1000)) + WriteRequest.grace
        // Made before the first wait (a try follows it): the holder's exit, its lock let go,
        // its control socket appearing (``HolderWatch``), as a write waits.
        var watch: HolderWatch?
        var noReply = false
        while true {
            switch try await access.reach(asking: ControlRequest.status(store: access.storeIdentifier).line, timeout: .seconds(5),
                                          lockHeld: watch?.lockIsHeld == true) {
            case .answered(let reply):
                let live = try LiveStatus(ControlRequest.fields(ofReply: reply))
                return (live, "from process \(live.pid), which holds the store", live.pid)
            case .opened(let opened):
                let port = try? await opened.syncPort()
                try? await Task.sleep(for: .milliseconds(Int(max(0, wait) * 1000)))
                let entries = opened.syncMetrics.map { (sent: $0.entriesSent, received: $0.entriesReceived) }
                let report = LiveStatus(pid: getpid(), store: access.storeIdentifier, port: port ?? nil, device: identity.deviceID.hex,
                                        connectedPeers: opened.internals.connectedPeerDeviceIDs, discoveredPeers: opened.discoveredPeers,
                                        discovery: store.discoveryDescription,
                                        lastExchange: (entries.map { $0.sent + $0.received } ?? 0) > 0 ? Date() : nil,
                                        entries: entries, figures: StoreFigures(opened.internals.replica, refusals: opened.syncRefusals))
                await opened.internals.close()
                return (report, "seen in \(wait) s from this process", nil)
            case .noReply:
                guard ContinuousClock.now < deadline else {
                    throw CommandError(.general, "the hearth process that holds store \(access.storeIdentifier) does not answer")
                }
                noReply = true
            case .held(let holder, let error):
                guard holder.mayLetGoSoon, ContinuousClock.now < deadline else { throw error }
                noReply = false
            }
            try Task.checkCancellation()
            guard let watch else {
                watch = access.holderWatch()
                continue
            }
            // A holder that dropped the request but lives on says nothing when it can take one
            // again: asked again within a quarter second (see WriteRequest.perform).
            await watch.wait(until: noReply ? min(deadline, .now + .milliseconds(250)) : deadline)
        }
    }
}
