import ArgumentParser
import Foundation
import Hearth
import HearthCore
import HearthDaemon

/// `hearth status`: the account, the stores on this device, their files and what is pending.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the account, this device's stores and files, and changes not yet confirmed by every known peer.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON for scripts.") var json = false

    struct StoreReport {
        var identifier: String
        var path: String
        var fileBytes: Int
        var figures: StoreFigures
        var modified: Date?
        var heldBy: Int32?
    }

    func run() async throws {
        let identity = try global.currentIdentity()
        global.warnIfCAKeyInClear()
        let folder = StoreLocation(dataDirectory: global.storeDataDirectory, storeIdentifier: "x", account: identity?.account.id.hex).directory
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".plist") }.sorted()
        var reports: [StoreReport] = []
        for name in names {
            let path = (folder as NSString).appendingPathComponent(name)
            guard let data = try? AtomicFile.read(path), let contents = try? ReplicaFile.decode(data, path: path) else {
                note("skipping \(path): not a readable store file")
                continue
            }
            let (replica, header) = (contents.replica, contents.header)
            let attributes = try? FileManager.default.attributesOfItem(atPath: path)
            let location = StoreLocation(dataDirectory: global.storeDataDirectory, storeIdentifier: header.storeIdentifier,
                                         account: identity?.account.id.hex)
            // The file can lag behind the process that holds the store (it saves changes, not
            // every acknowledgement at once): that process's own figures come first.
            let live = try await LiveStatus.ask(location, socketBase: global.folders.controlSocketBase)
            reports.append(StoreReport(identifier: header.storeIdentifier, path: path, fileBytes: data.count,
                                       figures: live?.figures ?? StoreFigures(replica),
                                       modified: attributes?[.modificationDate] as? Date, heldBy: live?.pid))
        }
        // Whether a peer said this device was removed (a record naming it, or a refusal as revoked).
        let removal: String? = identity.flatMap { identity in
            guard let removals = try? global.accounts.removals(of: identity.account.id) else { return nil }
            if let notice = removals.notice { return notice.description }
            return removals.removal(of: identity.deviceID).map { "this device was removed from the account at \($0.date)" }
        }
        if json {
            let stores = reports.map { r in
                "{\"store\":\(PropertyListJSON.quote(r.identifier)),\"file\":\(PropertyListJSON.quote(r.path)),\"fileBytes\":\(r.fileBytes),"
                    + "\"keys\":\(r.figures.keys),\"usageBytes\":\(r.figures.usageBytes),\"pending\":\(r.figures.pending),"
                    + "\"knownPeers\":\(r.figures.knownPeers),\"refused\":[\(r.figures.refused.map(PropertyListJSON.quote).joined(separator: ","))],"
                    + "\"heldBy\":\(r.heldBy.map(String.init) ?? "null")}"
            }
            emit("{\"signedIn\":\(identity.map(AccountCommand.json) ?? "null"),\"configDirectory\":\(PropertyListJSON.quote(global.accountDirectory.path)),"
                 + "\"dataDirectory\":\(PropertyListJSON.quote(global.storeDataDirectory)),\"removed\":\(removal.map(PropertyListJSON.quote) ?? "null"),"
                 + "\"stores\":[\(stores.joined(separator: ","))]}")
            return
        }
        if let identity {
            emit("account   \(identity.account.displayName) (\(identity.account.id.short)), device \(identity.deviceName) (\(identity.deviceID.short))")
            if let removal { emit("removed   \(removal); stores keep working on this device, no peer syncs with it") }
        } else {
            emit("account   signed out: stores work on this device only")
        }
        emit("config    \(global.accountDirectory.path)")
        emit("data      \(folder)")
        if reports.isEmpty { emit("stores    none yet on this device for this account") }
        for r in reports {
            let held = r.heldBy.map { ", open in process \($0)" } ?? ""
            emit("store     \(r.identifier): \(r.figures.keys) keys, \(r.figures.usageBytes) of \(StoreLimits.maximumTotalSize) bytes used\(held)")
            emit("          file \(r.path) (\(r.fileBytes) bytes\(r.modified.map { ", saved \(PropertyListJSON.dateString($0))" } ?? ""))")
            let pending = r.figures.pending
            emit("          pending: \(pending) entr\(pending == 1 ? "y" : "ies") not yet confirmed by every known peer (\(r.figures.knownPeers) known)"
                 + (r.heldBy == nil ? "" : ", as the process holding it says"))
            // Entries a peer would not take (most often: this device's clock is hours ahead).
            for refusal in r.figures.refused { emit("          refused: \(refusal)") }
        }
    }
}
