import Foundation
import HearthCore
import HearthIdentity

/// What the sync engine needs from a store: its replica, behind the store's own lock.
///
/// The store implements it (`Hearth`'s backend), the sync tests in memory; both over a
/// `SyncedReplica`, which holds every admission rule this contract describes, so that every
/// replica applies the same code. Every method is atomic with respect to the store's writes.
package protocol SyncReplica: AnyObject, Sendable {
    /// The store identifier that entries are signed for.
    var storeIdentifier: String { get }

    /// The replica's wall clock in milliseconds since 1970 (the system's, unless a test skews it).
    func wallMilliseconds() -> UInt64

    /// The replica's current version vector.
    var syncVector: VersionVector { get }

    /// The vector of what this replica has saved: what it keeps if the process dies now. Peers
    /// collect tombstones on this, never on ``syncVector`` (docs/protocol.md, "Tombstones"); a
    /// replica with no file keeps what it has for as long as it runs, so by default it is
    /// ``syncVector``.
    var durableVector: VersionVector { get }

    /// Every current entry `peer` does not cover, and the vector they bring the peer up to,
    /// taken in one atomic step.
    func syncDelta(for peer: VersionVector) -> (entries: [Entry], vector: VersionVector)

    /// Entries without a signature yet (local writes), to sign off the writer's path.
    func unsignedEntries() -> [Entry]

    /// Attaches signatures to the entries they were made for (ignored for entries that
    /// have since been replaced).
    func attachSignatures(_ signed: [Entry])

    /// The entries of `entries` that would change this replica (new keys, or winning by
    /// last-writer-wins over the current entry).
    func winningEntries(_ entries: [Entry]) -> [Entry]

    /// Applies verified entries atomically, advances the vector by exactly those entries, posts
    /// `reason` with the keys whose visible value changed, and returns them.
    ///
    /// `heldBack` are entries refused for now (stamped too far ahead of this replica's clock)
    /// that may be acceptable later: the vector is kept below each of them, so peers send them
    /// again, until one is applied or this replica holds a later write of its key.
    ///
    /// Entries that would take their signer's share of the store beyond
    /// `StoreLimits.maximumSignerBytes`, `maximumSignerKeys` or `maximumSignerTombstones` are not
    /// applied: they are returned as refused (`signerQuota`) and held back like `heldBack`; so are
    /// entries that would give another device more than `Replica.maximumOriginsPerDevice` origins
    /// owning entries, but not held back.
    func applyRemote(_ entries: [Entry], heldBack: [Entry], reason: ChangeReason) -> (changed: [StoreKey], refused: [RefusedEntry])

    /// Drops the entries signed by `device` (removed from the account at `removedAt`,
    /// milliseconds since 1970) stamped after its removal, posting `serverChange` for the keys
    /// whose visible value went; returns how many entries went, and if any did, ``wantsWhole``
    /// holds from then on (``Replica/dropEntries(signedBy:stampedAfter:)``).
    func dropEntries(signedBy device: Data, stampedAfter removedAt: UInt64) -> Int

    /// Whether entries were dropped (``dropEntries(signedBy:stampedAfter:)``) and no peer's whole
    /// store has come since (``Replica/wantsWhole``, saved with the replica).
    var wantsWhole: Bool { get }

    /// A peer's whole store came in: ``wantsWhole`` is cleared.
    func wholeReceived()

    /// A peer that dropped a removed device's later writes asked for our whole store: ours is
    /// wanted too (``wantsWhole`` set), as the entries it restored may be covered here by a
    /// vector whose replica holds an older value, or none (docs/protocol.md, "Device removals").
    func wantWhole()

    /// The current entry of `key`, tombstone included, if any.
    func entry(forKey key: StoreKey) -> Entry?

    /// Why the local write (`origin`, `sequence`) of `key` was stamped far ahead of this
    /// device's clock: the entry it replaced was (``Replica/imposedLeads``); `nil` otherwise.
    func imposedLead(forKey key: StoreKey, origin: ReplicaID, sequence: UInt64) -> Replica.ImposedLead?

    /// Writes again, with the current time, entries stamped while this device's clock was
    /// ahead, once it is back (``Replica/restampFutureEntries(wall:)``). Returns whether any was.
    @discardableResult
    func restampIfNeeded() -> Bool

    /// The DER certificates saved with the replica, by signer: the engine admits them at start,
    /// so it can vouch for entries whose signer it has not met since.
    var signerCertificates: [Data: Data] { get }

    /// Saves `der` with the replica as the certificate of `signer` (already verified).
    func keepCertificate(_ der: Data, signer: Data)

    /// The devices this replica has heard of: those that said hello to it, and those its peers
    /// said they know.
    var knownDevices: [DeviceID] { get }

    /// Adds devices a peer knows of as known, with nothing acknowledged yet, so that no
    /// tombstone is collected before they have it (or it is older than the horizon).
    func learnOfDevices(_ devices: [DeviceID])

    /// Forgets `device` as known if it has acknowledged nothing here (noted when its link came
    /// up, its hello then did not list this store: it cannot send an older entry of it), and
    /// collects the tombstones every device still known has.
    func forgetDevice(_ device: DeviceID)

    /// Records what a peer acknowledged and collects the tombstones every known peer has.
    func notePeer(_ device: DeviceID, acknowledged vector: VersionVector)

    /// Collects the tombstones every known peer has that waited for this device's clock to reach
    /// them, once it has (``SyncedReplica/collectReachedTombstones(wall:)``): called on the
    /// heartbeat, as no acknowledgement may come after (docs/simulator.md, finding 9).
    func collectReachedTombstones()

    /// Calls `handler` after every local change (on the writer's thread: it must be quick),
    /// instead of any handler given before (that of an engine since stopped).
    func onLocalChange(_ handler: @escaping @Sendable () -> Void)

    /// Whether the first download from the account's peers is still to come.
    var awaitingInitialSync: Bool { get }

    /// Marks the initial sync as done.
    func initialSyncCompleted()
}

extension SyncReplica {
    /// A replica with no file: what it holds is all it will ever have.
    package var durableVector: VersionVector { syncVector }

    /// A replica that collects only at acknowledgements (a hostile member's in the simulator).
    package func collectReachedTombstones() {}
}
