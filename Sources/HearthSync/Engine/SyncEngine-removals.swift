import HearthIdentity

// Device removals: the engine's ``RemovalCoordinator`` honours them.
extension SyncEngine {
    /// What a peer says of this device's standing, if it says it was removed (kept with the
    /// removals, so it outlives the process). The store keeps working locally; peers no longer
    /// sync with it.
    package var removalNotice: RemovalNotice? { removals.notice }
}
