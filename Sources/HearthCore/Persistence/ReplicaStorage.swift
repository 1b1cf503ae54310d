import Foundation
import Logging

/// One replica's file, held open for exclusive use by this process.
///
/// Opening takes the store's lock (a second process gets ``PersistenceError/Code/locked``
/// at once, never a half-written file) and removes temporary files left by a write that
/// was interrupted. Loading a damaged file moves it aside under a new name, logs the name,
/// and starts empty: the damaged bytes are kept for inspection, never overwritten.
public final class ReplicaStorage: Sendable {
    /// What ``load()`` found.
    public enum LoadResult: Sendable {
        /// No file yet.
        case fresh
        case loaded(Replica)
        /// The file was damaged; it now lives at `movedTo`.
        case recovered(error: PersistenceError, movedTo: String)
    }

    public let location: StoreLocation
    private let lock: FileLock
    private let logger: Logger

    public init(location: StoreLocation, logger: Logger = Logger(label: "hearth.persistence")) throws(PersistenceError) {
        try AtomicFile.createDirectory(location.directory)
        lock = try FileLock(path: location.lockPath)
        self.location = location
        self.logger = logger
        removeInterruptedWrites()
    }

    private var header: ReplicaFile.Header {
        ReplicaFile.Header(storeIdentifier: location.storeIdentifier, account: location.account ?? "")
    }

    /// Reads the replica, moving a damaged file aside.
    public func load() throws(PersistenceError) -> LoadResult {
        let path = location.filePath
        guard let data = try AtomicFile.read(path) else { return .fresh }
        do throws(PersistenceError) {
            let (replica, header) = try ReplicaFile.decode(data, path: path)
            guard header == self.header else {
                throw PersistenceError(.damaged, path: path, reason: "it belongs to store \(String(reflecting: header.storeIdentifier)) of account \(String(reflecting: header.account))")
            }
            return .loaded(replica)
        } catch {
            let aside = try moveAside(path)
            logger.error("store file is damaged; moved it aside and starting empty", metadata: [
                "file": "\(path)", "movedTo": "\(aside)", "reason": "\(error.reason)",
            ])
            return .recovered(error: error, movedTo: aside)
        }
    }

    /// Writes the replica atomically and durably.
    public func save(_ replica: Replica) throws(PersistenceError) {
        try AtomicFile.write(ReplicaFile.encode(replica, header: header), to: location.filePath)
    }

    private func moveAside(_ path: String) throws(PersistenceError) -> String {
        let stamp = Int(Date().timeIntervalSince1970)
        var target = "\(path).damaged-\(stamp)"
        var n = 1
        while FileManager.default.fileExists(atPath: target) {
            n += 1
            target = "\(path).damaged-\(stamp)-\(n)"
        }
        guard rename(path, target) == 0 else { throw .io("rename damaged file", path: path) }
        try AtomicFile.syncDirectory(of: path)
        return target
    }

    /// A temporary file beside ours is a save that a crash cut short; the store file itself
    /// is intact (it is only ever replaced by rename), so the leftover can go.
    private func removeInterruptedWrites() {
        let prefix = (location.filePath as NSString).lastPathComponent + AtomicFile.temporaryMarker
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: location.directory) else { return }
        for name in names where name.hasPrefix(prefix) {
            let path = (location.directory as NSString).appendingPathComponent(name)
            if unlink(path) == 0 { logger.notice("removed an interrupted write", metadata: ["file": "\(path)"]) }
        }
    }
}
