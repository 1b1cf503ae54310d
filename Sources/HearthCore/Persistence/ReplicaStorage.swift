import Foundation
import Logging

/// One replica's file, held open for exclusive use by this process.
///
/// Opening takes the store's lock (a second process gets ``PersistenceError/Code/locked``
/// at once, never a half-written file) and removes temporary files left by a write that
/// was interrupted. Loading a damaged file moves it aside under a new name, logs the name,
/// and starts empty: the damaged bytes are kept for inspection, never overwritten. A file
/// whose header is sound but some of whose entries are not loads every other entry, and a
/// copy of it is kept beside it with the entries that were set aside.
///
/// Every file operation goes to its ``StoreDisk`` (the real one in the product, a simulated one
/// in tests), the time that names a set-aside copy comes from its `wall` clock, and the replica
/// IDs of the runs opened on it from its `random` bits.
package final class ReplicaStorage: Sendable {
    /// What ``load()`` found.
    package enum LoadResult: Sendable {
        /// No file yet.
        case fresh
        case loaded(Replica)
        /// The file loaded but for `setAside`; the file as it was is copied to `copy`.
        case loadedSettingAside(Replica, setAside: [RefusedEntry], copy: String)
        /// The file was damaged; it now lives at `movedTo`.
        case recovered(error: PersistenceError, movedTo: String)
    }

    package let location: StoreLocation
    /// `location.filePath`, worked out once (escaping and path joins at every save showed in profiles).
    private let filePath: String
    /// Where the file is: another account's file of the store is opened on the same disk.
    package let disk: any StoreDisk
    private let lock: any StoreDiskLock
    private let logger: Logger
    /// Milliseconds since 1970, for the names of damaged and set-aside copies.
    private let wall: @Sendable () -> UInt64
    /// 64 random bits a call: the store's source of replica IDs.
    package let random: @Sendable () -> UInt64

    package init(location: StoreLocation, disk: any StoreDisk, logger: Logger, wall: @escaping @Sendable () -> UInt64,
                 random: @escaping @Sendable () -> UInt64) throws(PersistenceError) {
        try disk.createDirectory(location.directory, mode: 0o700)
        lock = try disk.lock(location.lockPath)
        self.location = location
        filePath = location.filePath
        self.disk = disk
        self.logger = logger
        self.wall = wall
        self.random = random
        removeInterruptedWrites()
    }

    private var header: ReplicaFile.Header {
        ReplicaFile.Header(storeIdentifier: location.storeIdentifier, account: location.account ?? "")
    }

    /// Reads the replica, moving a damaged file aside.
    package func load() throws(PersistenceError) -> LoadResult {
        let path = filePath
        guard let data = try disk.read(path) else { return .fresh }
        let contents: ReplicaFile.Contents
        do throws(PersistenceError) {
            contents = try ReplicaFile.decode(data, path: path)
            guard contents.header == self.header else {
                throw PersistenceError(.damaged, path: path, reason: "it belongs to store \(String(reflecting: contents.header.storeIdentifier)) of account \(String(reflecting: contents.header.account))")
            }
        } catch {
            let aside = try moveAside(path)
            logger.error("store file is damaged; moved it aside and starting empty", metadata: [
                "file": "\(path)", "movedTo": "\(aside)", "reason": "\(error.reason)",
            ])
            return .recovered(error: error, movedTo: aside)
        }
        guard !contents.setAside.isEmpty else { return .loaded(contents.replica) }
        // The next save rewrites the file without them: keep its bytes as they are first.
        let copy = uniqueName("\(path).set-aside")
        try disk.replace(data, at: copy)
        logger.error("some entries of the store file could not be loaded; loaded the others and kept a copy of the file", metadata: [
            "file": "\(path)", "copy": "\(copy)", "setAside": "\(contents.setAside.count)",
            "entries": "\(contents.setAside.map(\.description).joined(separator: "; "))",
        ])
        return .loadedSettingAside(contents.replica, setAside: contents.setAside, copy: copy)
    }

    /// Writes the replica atomically and durably.
    package func save(_ replica: Replica) throws(PersistenceError) {
        let data: Data
        do { data = try ReplicaFile.encode(replica, header: header) } catch {
            throw PersistenceError(.unencodable, path: filePath, reason: error.reason)
        }
        try disk.replace(data, at: filePath)
    }

    /// `<base>-<time>`, or `<base>-<time>-<n>` if that exists.
    private func uniqueName(_ base: String) -> String {
        let stamp = wall() / 1000
        var target = "\(base)-\(stamp)"
        var n = 1
        while disk.fileExists(target) {
            n += 1
            target = "\(base)-\(stamp)-\(n)"
        }
        return target
    }

    private func moveAside(_ path: String) throws(PersistenceError) -> String {
        let target = uniqueName("\(path).damaged")
        try disk.rename(path, to: target)
        try disk.syncDirectory(of: path)
        return target
    }

    /// A temporary file beside ours is a save that a crash cut short; the store file itself
    /// is intact (it is only ever replaced by rename), so the leftover can go.
    private func removeInterruptedWrites() {
        let prefix = (filePath as NSString).lastPathComponent + AtomicFile.temporaryMarker
        for name in disk.contentsOfDirectory(location.directory) where name.hasPrefix(prefix) {
            let path = (location.directory as NSString).appendingPathComponent(name)
            if disk.remove(path) { logger.notice("removed an interrupted write", metadata: ["file": "\(path)"]) }
        }
    }
}
