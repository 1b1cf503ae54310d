import Dispatch
import Foundation
import HearthCore
import Logging

/// The devices removed from one account, as this process knows them: what the TLS layer
/// refuses, what the sync engine checks entries against and relays to its peers.
///
/// One instance per account and config directory is shared by every engine and TLS context of
/// the process (``AccountStore/removals(of:)``). It is persisted in the account's directory
/// (`accounts/<id>/removals`, a binary property list of records) and only ever grows: a
/// removal is never undone (a removed device that should come back joins again, with a new
/// key). Records that do not verify against the account CA are ignored with a log line, in
/// the file as on the wire.
///
/// ```swift
/// let removals = try accounts.removals(of: account.id)
/// let token = removals.observe { added in print("removed:", added) }
/// removals.merge([record])           // verified, persisted, observers told
/// removals.isRemoved(device)         // cheap: a dictionary lookup under a lock
/// ```
package final class DeviceRemovals: Sendable {
    /// At most this many records per account (a household removes a few devices in its life;
    /// a peer cannot grow the set past this).
    package static let maximumRecords = 1024

    package let trust: AccountTrust
    /// Where the records are kept; nil keeps them in memory (test clusters, a bare engine).
    package let file: URL?
    private let records = Locked<[DeviceID: DeviceRemoval]>([:])
    private let heldNotice = Locked<RemovalNotice?>(nil)
    /// What records from peers that are not held proved to be (nil: it verifies; else why not),
    /// so that one sent again costs a lookup, not a signature check (``mergeFromPeer(_:)``).
    private let verdicts = Locked<[DeviceRemoval: String?]>([:])
    /// Signature checks of records from peers, for tests (``signatureChecks``).
    private let checks = Locked(0)
    private let observers = Locked<(next: UInt64, handlers: [UInt64: @Sendable ([DeviceRemoval]) -> Void])>((0, [:]))
    /// Saves happen here, never on the caller's thread: a session's reader must not fsync.
    private let saver = DispatchQueue(label: "hearth.identity.removals")
    private let logger: Logger

    /// The removals of `trust`'s account, read from `file` when given (records that do not verify
    /// are logged and skipped; a file that does not read is logged and treated as empty, and
    /// rewritten at the next change).
    package init(trust: AccountTrust, file: URL? = nil, logger: Logger) {
        self.trust = trust
        self.file = file
        self.logger = logger
        if let file {
            let (onDisk, notice) = Self.read(file, logger: logger)
            records.withLock { $0 = Self.verified(onDisk, trust: trust, logger: logger) }
            heldNotice.withLock { $0 = notice }
        }
    }

    // MARK: Asking

    /// Whether `device` is removed from the account.
    package func isRemoved(_ device: DeviceID) -> Bool { records.withLock { $0[device] != nil } }

    /// The removal record of `device`, if it is removed.
    package func removal(of device: DeviceID) -> DeviceRemoval? { records.withLock { $0[device] } }

    /// Every record, by device ID.
    package var all: [DeviceRemoval] { records.withLock { Array($0.values) }.sorted { $0.device < $1.device } }

    package var isEmpty: Bool { records.withLock { $0.isEmpty } }

    /// What a peer said of this device's own standing, if one sent the account-signed record
    /// of its removal (see ``RemovalNotice``); kept in the file with the records. A notice
    /// without a record that holds here (one an older build kept for a bare TLS alert, which
    /// any member could send: issue 26) says nothing.
    package var notice: RemovalNotice? {
        guard let notice = heldNotice.withLock({ $0 }), let record = notice.record, removal(of: record.device) != nil else { return nil }
        return notice
    }

    /// Keeps `notice` if it carries the signed record (a notice with the record replaces one without).
    package func note(_ notice: RemovalNotice) {
        guard notice.record != nil else { return }
        let changed = heldNotice.withLock { held -> Bool in
            guard held == nil || (held?.record == nil && notice.record != nil) else { return false }
            held = notice
            return true
        }
        if changed, file != nil { saver.async { [self] in saveLogging() } }
    }

    /// The first 8 bytes of the SHA-256 of the records' device IDs and signatures, sorted by
    /// device: what a hello carries so that two devices with the same removals exchange none.
    package var digest: Data { Self.digest(of: all) }

    package static func digest(of records: [DeviceRemoval]) -> Data {
        var bytes: [UInt8] = []
        for record in records.sorted(by: { $0.device < $1.device }) {
            bytes += record.device.bytes
            bytes += record.signature
        }
        return Data(SHA256.hash(bytes).prefix(8))
    }

    // MARK: Learning

    /// Adds the records that verify and are new (or preferred to the one held, see
    /// ``DeviceRemoval/preferred(_:_:)``); saves and tells the observers if any were.
    /// Returns those.
    @discardableResult
    package func merge(_ incoming: [DeviceRemoval]) -> [DeviceRemoval] {
        add(Self.verified(incoming, trust: trust, logger: logger))
    }

    /// At most this many verdicts on records from peers are kept (``mergeFromPeer(_:)``): a
    /// household has a few real removals; past this the cache starts again (a check each).
    package static let maximumVerdicts = 1024

    /// Signature checks made of records from peers so far.
    package var signatureChecks: Int { checks.withLock { $0 } }

    /// Merges the records of a peer's `removals` message, at a bounded cost whatever it holds:
    /// a record repeated is looked at once, one held already costs a lookup, one seen before
    /// (valid or forged) costs a lookup too; only a record never seen is verified. The first
    /// that does not verify ends it: an honest device never sends one (it verified each before
    /// keeping it), so the rest of such a message is ignored, and with it that record's
    /// error for the caller to log (this logs nothing per record: a peer could make it log
    /// without end). Returns the records added, as ``merge(_:)``.
    package func mergeFromPeer(_ incoming: [DeviceRemoval]) -> (added: [DeviceRemoval], forged: (record: DeviceRemoval, why: String)?) {
        var seen = Set<DeviceRemoval>()
        var candidates: [DeviceID: DeviceRemoval] = [:]
        var forged: (record: DeviceRemoval, why: String)?
        for record in incoming where seen.insert(record).inserted {
            if records.withLock({ $0[record.device] == record }) { continue }
            if let why = verdict(of: record) {
                forged = (record, why)
                break
            }
            candidates[record.device] = candidates[record.device].map { DeviceRemoval.preferred($0, record) } ?? record
        }
        return (add(candidates), forged)
    }

    /// Why `record` does not verify, or nil if it does: from the cache, or checked (and kept).
    private func verdict(of record: DeviceRemoval) -> String? {
        if let known = verdicts.withLock({ $0[record] }) { return known }
        checks.withLock { $0 += 1 }
        var why: String?
        do { try record.verify(with: trust) } catch { why = "\(error)" }
        verdicts.withLock { cache in
            if cache.count >= Self.maximumVerdicts { cache.removeAll() }
            cache[record] = .some(why)
        }
        return why
    }

    /// Adds the verified `candidates` that are new (or preferred to the one held); saves and
    /// tells the observers if any were. Returns those.
    private func add(_ candidates: [DeviceID: DeviceRemoval]) -> [DeviceRemoval] {
        guard !candidates.isEmpty else { return [] }
        let added = records.withLock { table -> [DeviceRemoval] in
            var added: [DeviceRemoval] = []
            for record in candidates.values {
                let kept = table[record.device].map { DeviceRemoval.preferred($0, record) } ?? record
                guard kept != table[record.device] else { continue }
                guard table[record.device] != nil || table.count < Self.maximumRecords else { continue }
                table[record.device] = kept
                added.append(kept)
            }
            return added
        }
        guard !added.isEmpty else { return [] }
        for record in added { logger.notice("device removed from the account: \(record)") }
        if file != nil { saver.async { [self] in saveLogging() } }
        let handlers = observers.withLock { Array($0.handlers.values) }
        for handler in handlers { handler(added) }
        return added
    }

    /// Reads the file again (another process of this user wrote it: `hearth device remove`, a
    /// daemon) and merges what it holds.
    @discardableResult
    package func reload() -> [DeviceRemoval] {
        guard let file else { return [] }
        let (onDisk, notice) = Self.read(file, logger: logger)
        if let notice { heldNotice.withLock { held in if held == nil { held = notice } } }
        let added = merge(onDisk)
        // Records this process holds and the file lacks (two processes saved at once): save again.
        if added.isEmpty, Set(onDisk.map(\.device)) != Set(records.withLock { $0.keys }) {
            saver.async { [self] in saveLogging() }
        }
        return added
    }

    /// Saves now, on the caller's thread, and returns once the file is durable (the command's
    /// `device remove` does this before it says the device is removed).
    package func saveNow() throws {
        guard file != nil else { return }
        try saver.sync { try writeFile() }
    }

    /// Waits until every save asked for so far is done (tests, orderly exits).
    package func flush() { saver.sync {} }

    // MARK: Observing

    /// Calls `handler` with the records each ``merge(_:)`` or ``reload()`` added, on the thread
    /// that merged (keep it short). Returns a token for ``removeObserver(_:)``.
    @discardableResult
    package func observe(_ handler: @escaping @Sendable ([DeviceRemoval]) -> Void) -> UInt64 {
        observers.withLock { o in
            defer { o.next &+= 1 }
            o.handlers[o.next] = handler
            return o.next
        }
    }

    package func removeObserver(_ token: UInt64) {
        observers.withLock { _ = $0.handlers.removeValue(forKey: token) }
    }

    // MARK: The file

    /// Read, merge, write under the file's lock (``AccountRecordFile``).
    private func saveLogging() {
        do {
            try writeFile()
        } catch {
            logger.error("cannot save the device removals to \(file?.path ?? "-"): \(error)")
        }
    }

    private func writeFile() throws {
        guard let file else { return }
        let held = records.withLock { Array($0.values) }
        let notice = self.notice
        try AccountRecordFile(url: file).update { onDisk in
            var merged = Self.verified(Self.records(in: onDisk), trust: trust, logger: logger)
            for record in held {
                merged[record.device] = merged[record.device].map { DeviceRemoval.preferred($0, record) } ?? record
            }
            var document: [String: PropertyListValue] = [
                "version": 1, "removals": .array(merged.values.sorted { $0.device < $1.device }.map(\.propertyList)),
            ]
            if let kept = notice ?? RemovalNotice(propertyList: onDisk?.dictionaryValue?["notice"]) { document["notice"] = kept.propertyList }
            return .dictionary(document)
        }
    }

    static func read(_ file: URL, logger: Logger) -> (records: [DeviceRemoval], notice: RemovalNotice?) {
        let document: PropertyListValue?
        do { document = try AccountRecordFile(url: file).read() } catch {
            logger.error("cannot read the device removals: \(error); ignoring the file (it is rewritten at the next removal)")
            return ([], nil)
        }
        guard let document else { return ([], nil) }
        guard document.dictionaryValue?["removals"]?.arrayValue != nil else {
            logger.error("\(file.path) is not a removals file; ignoring it (it is rewritten at the next removal)")
            return ([], nil)
        }
        let list = document.dictionaryValue?["removals"]?.arrayValue ?? []
        let records = self.records(in: document)
        if records.count < min(list.count, maximumRecords) {
            logger.warning("\(file.path): \(min(list.count, maximumRecords) - records.count) records do not read; ignored")
        }
        return (records, RemovalNotice(propertyList: document.dictionaryValue?["notice"]))
    }

    /// The records a removals document holds (at most ``maximumRecords``; those that do not read are skipped).
    static func records(in document: PropertyListValue?) -> [DeviceRemoval] {
        let list = document?.dictionaryValue?["removals"]?.arrayValue ?? []
        return list.prefix(maximumRecords).compactMap(DeviceRemoval.init(propertyList:))
    }

    /// The records that verify, one per device (the preferred one).
    static func verified(_ records: [DeviceRemoval], trust: AccountTrust, logger: Logger) -> [DeviceID: DeviceRemoval] {
        var result: [DeviceID: DeviceRemoval] = [:]
        for record in records {
            do {
                try record.verify(with: trust)
            } catch {
                logger.warning("ignoring a device removal that does not verify: \(error)")
                continue
            }
            result[record.device] = result[record.device].map { DeviceRemoval.preferred($0, record) } ?? record
        }
        return result
    }
}
