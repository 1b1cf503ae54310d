import ArgumentParser
import Foundation
import Hearth
import HearthCore

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
        var keys: Int
        var usageBytes: Int
        var pending: Int
        var knownPeers: Int
        var modified: Date?
        var heldBy: Int32?
    }

    func run() async throws {
        let identity = try global.currentIdentity()
        let folder = StoreLocation(dataDirectory: global.storeDataDirectory, storeIdentifier: "x", account: identity?.account.id.hex).directory
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".plist") }.sorted()
        var reports: [StoreReport] = []
        for name in names {
            let path = (folder as NSString).appendingPathComponent(name)
            guard let data = try? AtomicFile.read(path), let (replica, header) = try? ReplicaFile.decode(data, path: path) else {
                note("skipping \(path): not a readable store file")
                continue
            }
            let attributes = try? FileManager.default.attributesOfItem(atPath: path)
            // Pending: entries some known peer has not acknowledged (all of them when no peer is known yet).
            let stable = replica.stableVector
            let pending = replica.entries.values.filter { entry in stable.map { !$0.covers(entry) } ?? true }.count
            let location = StoreLocation(dataDirectory: global.storeDataDirectory, storeIdentifier: header.storeIdentifier,
                                         account: identity?.account.id.hex)
            reports.append(StoreReport(identifier: header.storeIdentifier, path: path, fileBytes: data.count,
                                       keys: replica.usage.keys, usageBytes: replica.usage.bytes, pending: pending,
                                       knownPeers: replica.peerVectors.count,
                                       modified: attributes?[.modificationDate] as? Date,
                                       heldBy: StatusFile(location: location).read()?.pid))
        }
        if json {
            let stores = reports.map { r in
                "{\"store\":\(PropertyListJSON.quote(r.identifier)),\"file\":\(PropertyListJSON.quote(r.path)),\"fileBytes\":\(r.fileBytes),"
                    + "\"keys\":\(r.keys),\"usageBytes\":\(r.usageBytes),\"pending\":\(r.pending),\"knownPeers\":\(r.knownPeers),"
                    + "\"heldBy\":\(r.heldBy.map(String.init) ?? "null")}"
            }
            emit("{\"signedIn\":\(identity.map(AccountCommand.json) ?? "null"),\"configDirectory\":\(PropertyListJSON.quote(global.accountDirectory.path)),"
                 + "\"dataDirectory\":\(PropertyListJSON.quote(global.storeDataDirectory)),\"stores\":[\(stores.joined(separator: ","))]}")
            return
        }
        if let identity {
            emit("account   \(identity.account.displayName) (\(identity.account.id.short)), device \(identity.deviceName) (\(identity.deviceID.short))")
        } else {
            emit("account   signed out: stores work on this device only")
        }
        emit("config    \(global.accountDirectory.path)")
        emit("data      \(folder)")
        if reports.isEmpty { emit("stores    none yet on this device for this account") }
        for r in reports {
            let held = r.heldBy.map { ", open in process \($0)" } ?? ""
            emit("store     \(r.identifier): \(r.keys) keys, \(r.usageBytes) of \(StoreLimits.maximumTotalSize) bytes used\(held)")
            emit("          file \(r.path) (\(r.fileBytes) bytes\(r.modified.map { ", saved \(PropertyListJSON.dateString($0))" } ?? ""))")
            emit("          pending: \(r.pending) entr\(r.pending == 1 ? "y" : "ies") not yet confirmed by every known peer (\(r.knownPeers) known)")
        }
    }
}
