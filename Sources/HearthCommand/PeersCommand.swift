import ArgumentParser
import Foundation
import Hearth

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
        let live = StatusFile(location: access.location).read()
        let report: StatusFile.Contents
        let source: String
        if let live {
            report = live
            source = "from process \(live.pid), which holds the store"
        } else {
            let opened = try access.open()
            let port = try? await opened.syncPort()
            let deadline = ContinuousClock.now + .milliseconds(Int(max(0, wait) * 1000))
            while ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            let metrics = opened.syncMetrics
            report = StatusFile.Contents(pid: getpid(), port: port ?? nil, device: identity.deviceID.hex,
                                         connectedPeers: opened.connectedPeerDeviceIDs,
                                         lastExchange: (metrics?.entriesSent ?? 0) + (metrics?.entriesReceived ?? 0) > 0 ? Date() : nil,
                                         entries: metrics.map { ($0.entriesSent, $0.entriesReceived) },
                                         discovery: store.discoveryDescription,
                                         discoveredPeers: opened.discoveredPeers)
            await opened.close()
            source = "seen in \(wait) s from this process"
        }
        if json {
            let peers = report.connectedPeers.map { "\"\($0)\"" }.joined(separator: ",")
            emit("{\"store\":\(PropertyListJSON.quote(access.storeIdentifier)),\"device\":\"\(identity.deviceID.hex)\","
                 + "\"port\":\(report.port.map(String.init) ?? "null"),\"connectedPeers\":[\(peers)],"
                 + "\"lastExchange\":\(report.lastExchange.map { "\"\(PropertyListJSON.dateString($0))\"" } ?? "null"),"
                 + "\"entriesSent\":\(report.entriesSent),\"entriesReceived\":\(report.entriesReceived),"
                 + "\"discovery\":\(PropertyListJSON.quote(report.discovery ?? store.discoveryDescription)),"
                 + "\"discoveredPeers\":[\((report.discoveredPeers ?? []).map(PropertyListJSON.quote).joined(separator: ","))],"
                 + "\"heldBy\":\(live.map { String($0.pid) } ?? "null")}")
            return
        }
        emit("store \(access.storeIdentifier) on \(access.whoAmI)")
        emit("  listening on port \(report.port.map(String.init) ?? "-"), discovery \(report.discovery ?? store.discoveryDescription)")
        emit("  \(report.connectedPeers.count) connected peer device\(report.connectedPeers.count == 1 ? "" : "s") (\(source)):")
        for peer in report.connectedPeers { emit("    \(peer.prefix(8))  \(peer)") }
        let discovered = report.discoveredPeers ?? []
        emit("  \(discovered.count) discovered peer\(discovered.count == 1 ? "" : "s") (connected or not):")
        for peer in discovered { emit("    \(peer)") }
        let last = report.lastExchange.map { "\(PropertyListJSON.dateString($0)) (\(Int(-$0.timeIntervalSinceNow)) s ago)" } ?? "never"
        emit("  last entries exchanged: \(last); sent \(report.entriesSent), received \(report.entriesReceived)")
    }
}
